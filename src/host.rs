//! What this machine's CPUs are doing, from the first line of /proc/stat:
//! how much time the hypervisor stole (for `ringflow bench`'s figures) and
//! whether a core has lately been idle (for a caller deciding to spin).
//!
//! Owns: reading and parsing /proc/stat, and the process-wide spare-core
//! sample. Must not know who spins or what is measured.

use parking_lot::Mutex;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The machine's CPU time counters from the first line of /proc/stat, in
/// clock ticks: everything, idle (with I/O wait), and what the hypervisor
/// stole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    pub total: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Now, or `None` where /proc/stat is missing or has no steal column.
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Parses the aggregate `cpu` line: user nice system idle iowait irq
    /// softirq steal [guest guest_nice]; guest time is already inside user
    /// and nice, so the total is the first eight.
    pub fn parse(proc_stat: &str) -> Option<CpuTimes> {
        let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> =
            line.split_whitespace().skip(1).take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
        (fields.len() == 8).then(|| CpuTimes {
            total: fields.iter().sum(),
            idle: fields[3] + fields[4],
            steal: fields[7],
        })
    }

    /// Percent of the CPU time between `self` and `later` that was stolen.
    pub fn steal_pct_until(&self, later: &CpuTimes) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| 100.0 * steal as f64 / total as f64)
    }

    /// How many cores were idle on average between `self` and `later`,
    /// `wall` apart, with `ticks_per_second` clock ticks a second.
    pub fn idle_cores_until(&self, later: &CpuTimes, wall: Duration, ticks_per_second: u64) -> Option<f64> {
        let idle = later.idle.checked_sub(self.idle)?;
        let wall = wall.as_secs_f64();
        (wall > 0.0 && ticks_per_second > 0).then(|| idle as f64 / ticks_per_second as f64 / wall)
    }
}

/// How long a spare-core answer stands before /proc/stat is read again:
/// long enough that the read (tens of µs) is rare, short enough to follow a
/// machine whose load changes.
pub const SPARE_CORE_WINDOW: Duration = Duration::from_millis(50);

/// Idle cores, on average over a window, that count as a spare one: a
/// spinner then runs where nobody else would. Half a core, so a core idle
/// between a chain's hops counts, and one shared by busy threads does not.
pub const SPARE_CORE_MIN_IDLE: f64 = 0.5;

/// Whether this machine has lately had a core nobody used (at least
/// [`SPARE_CORE_MIN_IDLE`] idle cores over the last window). Costs a clock
/// read and two atomic loads; one caller in a window re-reads /proc/stat.
/// True until a first window has been measured, and where /proc/stat
/// cannot be read.
pub fn has_spare_core() -> bool {
    static SAMPLER: OnceLock<SpareCore> = OnceLock::new();
    SAMPLER.get_or_init(SpareCore::new).answer(Instant::now())
}

/// The open /proc/stat, and the last counters read with when.
struct Reading {
    file: Option<File>,
    last: Option<(Instant, CpuTimes)>,
}

/// The process-wide spare-core sample behind [`has_spare_core`].
struct SpareCore {
    base: Instant,
    /// Nanoseconds after `base` when the window in force began.
    window_start_ns: AtomicU64,
    spare: AtomicBool,
    /// Held by the one caller re-reading /proc/stat (others keep the old
    /// answer).
    reading: Mutex<Reading>,
    ticks_per_second: u64,
}

impl SpareCore {
    fn new() -> SpareCore {
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let file = File::open("/proc/stat").ok();
        let first = file.as_ref().and_then(read_cpu_times).map(|times| (Instant::now(), times));
        SpareCore {
            base: Instant::now(),
            window_start_ns: AtomicU64::new(0),
            spare: AtomicBool::new(true),
            reading: Mutex::new(Reading { file, last: first }),
            ticks_per_second: u64::try_from(ticks).unwrap_or(100),
        }
    }

    fn answer(&self, now: Instant) -> bool {
        self.answer_with(now, read_cpu_times)
    }

    /// [`SpareCore::answer`], reading the counters with `read`.
    fn answer_with(&self, now: Instant, read: impl FnOnce(&File) -> Option<CpuTimes>) -> bool {
        let now_ns = now.saturating_duration_since(self.base).as_nanos() as u64;
        let due =
            now_ns.saturating_sub(self.window_start_ns.load(Ordering::Relaxed)) >= SPARE_CORE_WINDOW.as_nanos() as u64;
        if due {
            if let Some(mut reading) = self.reading.try_lock() {
                self.window_start_ns.store(now_ns, Ordering::Relaxed);
                let Reading { file, last } = &mut *reading;
                if let Some(times) = file.as_ref().and_then(read) {
                    if let Some((at, before)) = *last {
                        if let Some(idle) = before.idle_cores_until(&times, now - at, self.ticks_per_second) {
                            self.spare.store(idle >= SPARE_CORE_MIN_IDLE, Ordering::Relaxed);
                        }
                    }
                    *last = Some((now, times));
                }
            }
        }
        self.spare.load(Ordering::Relaxed)
    }
}

/// The `cpu` line, read from the start of an open /proc/stat (the file is
/// generated anew at each read from offset 0).
fn read_cpu_times(file: &File) -> Option<CpuTimes> {
    let mut buf = [0u8; 256];
    let n = file.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let first_line = text.split('\n').next()?;
    CpuTimes::parse(first_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_column_and_idle_the_fourth_and_fifth() {
        let before = "cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 50 0 25 400 5 0 2 18 0 0\n";
        let after = "cpu  160 0 60 900 10 0 5 65 9 0\ncpu0 80 0 30 450 5 0 2 33 0 0\n";
        let (a, b) = (CpuTimes::parse(before).expect("parses"), CpuTimes::parse(after).expect("parses"));
        assert_eq!(a, CpuTimes { total: 1000, idle: 810, steal: 35 });
        assert_eq!(b.steal_pct_until(&a), None, "time does not run backwards");
        let pct = a.steal_pct_until(&b).expect("time passed");
        assert!((pct - 100.0 * 30.0 / 200.0).abs() < 1e-9, "{pct}");
        assert_eq!(CpuTimes::parse("cpu  1 2 3 4\n"), None, "a kernel without a steal column");
        assert_eq!(CpuTimes::parse("intr 5\n"), None);
    }

    #[test]
    fn idle_cores_are_idle_ticks_per_second_of_wall_time() {
        let at = |idle| CpuTimes { total: 0, idle, steal: 0 };
        // 150 idle ticks at 100 a second over one second: 1.5 cores idle.
        let idle = at(1000).idle_cores_until(&at(1150), Duration::from_secs(1), 100).expect("measured");
        assert!((idle - 1.5).abs() < 1e-9, "{idle}");
        let idle = at(1000).idle_cores_until(&at(1010), Duration::from_millis(200), 100).expect("measured");
        assert!((idle - 0.5).abs() < 1e-9, "{idle}");
        assert_eq!(at(5).idle_cores_until(&at(4), Duration::from_secs(1), 100), None);
        assert_eq!(at(5).idle_cores_until(&at(6), Duration::ZERO, 100), None);
    }

    #[test]
    fn the_answer_follows_the_idle_time_of_each_window() {
        let sampler = SpareCore::new();
        if sampler.reading.lock().file.is_none() {
            return; // No /proc/stat to stand in for.
        }
        let ticks = sampler.ticks_per_second;
        let start = Instant::now() + SPARE_CORE_WINDOW;
        let times = |idle: u64| CpuTimes { total: 0, idle, steal: 0 };
        let at = |idle: u64| move |_: &File| Some(times(idle));
        sampler.reading.lock().last = Some((start - SPARE_CORE_WINDOW, times(0)));
        // A window where the cores were busy all along: no spare core.
        assert!(!sampler.answer_with(start, at(0)));
        // Within the window the answer stands, whatever a read would say.
        assert!(!sampler.answer_with(start + SPARE_CORE_WINDOW / 2, at(1_000_000)));
        // A window with one core idle throughout (ticks/s × window): spare.
        let window_ticks = ticks * SPARE_CORE_WINDOW.as_millis() as u64 / 1000;
        assert!(sampler.answer_with(start + SPARE_CORE_WINDOW, at(window_ticks)));
        // Then under half a core idle again: not spare.
        let a_third = window_ticks + window_ticks / 3;
        assert!(!sampler.answer_with(start + 2 * SPARE_CORE_WINDOW, at(a_third)));
        // A failed read keeps the last answer.
        assert!(!sampler.answer_with(start + 3 * SPARE_CORE_WINDOW, |_: &File| None));
    }

    #[test]
    fn this_machine_answers_and_the_answer_holds_for_a_window() {
        let sampler = SpareCore::new();
        let start = Instant::now();
        assert!(sampler.answer(start), "spare until a window was measured");
        // Within the window the answer stands (no read happens).
        assert!(sampler.answer(start + SPARE_CORE_WINDOW / 2));
        let Some(first) = sampler.reading.lock().last else {
            return; // No /proc/stat: the answer stays "spare".
        };
        // After a window: some answer, from a real reading.
        std::thread::sleep(SPARE_CORE_WINDOW);
        let _ = sampler.answer(Instant::now());
        let second = sampler.reading.lock().last.expect("still readable");
        assert!(second.0 > first.0 && second.1.total >= first.1.total, "a second reading was taken");
    }
}
