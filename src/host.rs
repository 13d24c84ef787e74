//! What this machine's CPUs are doing, from the first line of /proc/stat
//! and the CPU pressure of /proc/pressure/cpu: how much time the hypervisor
//! stole (for `ringflow bench`'s figures) and whether a core has lately
//! been idle or nobody has waited for one, and this process's yields have
//! not lately handed their cores to other threads (for a caller deciding to
//! spin).
//!
//! Owns: reading and parsing /proc/stat and /proc/pressure/cpu, the
//! process-wide spare-core sample and the record of yields that gave a
//! core away. Must not know who spins or what is measured.

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

/// How often the CPU pressure is read (/proc/pressure/cpu, about 2 µs to
/// read here): often enough that threads starting to wait for a core turn
/// spinners back to yielding within milliseconds, rare enough to cost
/// nothing measurable.
pub const PRESSURE_SAMPLE: Duration = Duration::from_millis(10);

/// The share of wall time with some thread waiting for a core (PSI's `some`
/// CPU stall) below which a spinner keeps its core. Two processes ping-pong
/// on two cores at about 2% here (housekeeping threads), a client, a master
/// and a worker on two cores at about 51%.
pub const CALM_MAX_STALL: f64 = 0.05;

/// How long every pressure sample must have stayed under
/// [`CALM_MAX_STALL`] before a spinner may keep its core again: one quiet
/// sample among busy ones must not let three processes spin purely on two
/// cores.
pub const CALM_WINDOW: Duration = Duration::from_millis(50);

/// A yield that kept its caller off its core at least this long gave the
/// core to another thread (a yield that finds nobody else to run returns
/// in well under it; two processes yielding to each other on one core take
/// two switches, about 1.8 µs on the 2 vCPU VMs).
pub const CORE_TAKEN: Duration = Duration::from_micros(1);

/// Two yields in a row that gave their core away, within this long of each
/// other, mean this process's waits queue for cores with other threads:
/// one alone may be the kernel's own housekeeping.
pub const CROWDED_PAIR: Duration = Duration::from_millis(10);

/// How long, after such a pair, no spinner of this process counts a core
/// as spare, unless a yield first finds nobody else to run (which ends it).
/// Idle stretches between bursts of steps leave cores idle in every
/// /proc/stat window, and without this the spare-core answer lets three
/// processes spin purely on two cores, each hop waiting out a pure phase:
/// step-remote over shared memory in blocks of 250 steps after 7 ms idle,
/// 2 vCPU AMD EPYC 9004 VM, p50 26.4–29.0 µs against 8.1–8.4 µs with this
/// hold (`examples/step_bursts.rs`). Threads sleep through such stretches,
/// so the hold outlasts them.
pub const CROWDED_HOLD: Duration = Duration::from_millis(50);

/// Whether a spinner may keep its core: this machine has lately had a core
/// nobody used (at least [`SPARE_CORE_MIN_IDLE`] idle cores over the last
/// window), or no thread has been kept waiting for a core over the last
/// [`CALM_WINDOW`] (CPU pressure under [`CALM_MAX_STALL`] at every sample:
/// two spinners on two cores hold nobody up), unless this process's waits
/// lately yielded their cores to other threads twice in a row
/// ([`note_yield`], [`CROWDED_HOLD`]). A run-queue count cannot
/// tell this: since kernel 6.12 it includes threads that went to sleep but
/// stay queued until their lag is paid (three on two cores in a
/// two-process ping-pong here). Costs a clock read and a few atomic loads;
/// one caller in a window re-reads /proc/stat, one in [`PRESSURE_SAMPLE`]
/// /proc/pressure/cpu. True until a first window has been measured, and
/// where /proc/stat cannot be read.
pub fn has_spare_core() -> bool {
    has_spare_core_at(Instant::now())
}

/// [`has_spare_core`], asked at `now` (a spinner that has just read the
/// clock saves a second read).
pub fn has_spare_core_at(now: Instant) -> bool {
    spare_core().answer(now)
}

/// A spin-wait's yield at `at` kept it off its core for `took`: past
/// [`CORE_TAKEN`] another thread had the core, and a second such yield in
/// a row within [`CROWDED_PAIR`] makes [`has_spare_core`] false for
/// [`CROWDED_HOLD`]; a quicker one (nobody else wanted the core) ends
/// that at once.
#[inline]
pub fn note_yield(at: Instant, took: Duration) {
    spare_core().note_yield(at, took);
}

fn spare_core() -> &'static SpareCore {
    static SAMPLER: OnceLock<SpareCore> = OnceLock::new();
    SAMPLER.get_or_init(SpareCore::new)
}

/// An open /proc file read at most once a period, and its last reading.
struct Sampled<T> {
    /// Nanoseconds after `SpareCore::base` of the last read.
    read_ns: AtomicU64,
    /// Held by the one caller reading (others keep the answer in force).
    state: Mutex<SampledState<T>>,
}

struct SampledState<T> {
    file: Option<File>,
    /// Nanoseconds after `SpareCore::base`, and what was read then.
    last: Option<(u64, T)>,
}

impl<T: Copy> Sampled<T> {
    fn new(file: Option<File>, first: Option<(u64, T)>) -> Sampled<T> {
        Sampled { read_ns: AtomicU64::new(0), state: Mutex::new(SampledState { file, last: first }) }
    }

    /// Once `period` has passed since the last read, reads the file with
    /// `read` and hands the last reading, this one and the nanoseconds
    /// between them to `compare`.
    fn sample(
        &self,
        now_ns: u64,
        period: Duration,
        read: impl FnOnce(&File) -> Option<T>,
        compare: impl FnOnce(T, T, u64),
    ) {
        if now_ns.saturating_sub(self.read_ns.load(Ordering::Relaxed)) < period.as_nanos() as u64 {
            return;
        }
        let Some(mut state) = self.state.try_lock() else {
            return;
        };
        self.read_ns.store(now_ns, Ordering::Relaxed);
        let SampledState { file, last } = &mut *state;
        if let Some(reading) = file.as_ref().and_then(read) {
            if let Some((then_ns, before)) = *last {
                compare(before, reading, now_ns.saturating_sub(then_ns));
            }
            *last = Some((now_ns, reading));
        }
    }
}

/// The calling thread's affinity mask, when it allows a CPU other than
/// the one the thread runs on: one lookup for a wait that needs both to
/// tell its peer whether it could move and, maybe, to move.
pub struct OtherCpus {
    allowed: nix::sched::CpuSet,
    elsewhere: nix::sched::CpuSet,
}

/// How long a thread's answer to [`may_leave_cpu`] stands before it is
/// looked up again: affinity changes rarely, and a wait that notes its
/// CPU for its peer asks at each note.
pub const AFFINITY_RECHECK: Duration = Duration::from_millis(100);

/// Whether the calling thread's affinity allows it more than one CPU, as
/// looked up at most [`AFFINITY_RECHECK`] before `now` (on this thread):
/// the affinity syscall and a scan of the mask cost more than a short
/// wait. A thread about to move looks its CPUs up afresh
/// ([`other_cpus`]).
pub fn may_leave_cpu(now: Instant) -> bool {
    thread_local! {
        static LOOKED_UP: std::cell::Cell<Option<(Instant, bool)>> = const { std::cell::Cell::new(None) };
    }
    LOOKED_UP.with(|looked_up| {
        if let Some((at, several)) = looked_up.get()
            && now.saturating_duration_since(at) < AFFINITY_RECHECK
        {
            return several;
        }
        let several = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .is_ok_and(|allowed| cpus_in(&allowed).nth(1).is_some());
        looked_up.set(Some((now, several)));
        several
    })
}

/// The CPUs `set` holds, in order.
pub fn cpus_in(set: &nix::sched::CpuSet) -> impl Iterator<Item = usize> + '_ {
    (0..nix::sched::CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false))
}

/// [`OtherCpus`] of the calling thread; `None` where its affinity allows
/// no other CPU or the CPU is unknown.
pub fn other_cpus() -> Option<OtherCpus> {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let here = usize::try_from(unsafe { libc::sched_getcpu() }).ok()?;
    let mut elsewhere = allowed;
    elsewhere.unset(here).ok()?;
    cpus_in(&elsewhere).next().is_some().then_some(OtherCpus { allowed, elsewhere })
}

impl OtherCpus {
    /// Moves the calling thread (the one that looked its CPUs up) off the
    /// CPU it runs on to another one its affinity allows, and leaves that
    /// affinity as it was: `false` when the move failed. For a thread that
    /// learned it shares a core with the one it waits for while another
    /// core idles: the scheduler's own balancing leaves two threads that
    /// each run every few µs where they are (both look cache-hot).
    pub fn leave_current_cpu(self) -> bool {
        let this_thread = nix::unistd::Pid::from_raw(0);
        if nix::sched::sched_setaffinity(this_thread, &self.elsewhere).is_err() {
            return false;
        }
        // The move happened inside the call above; the old mask lets the
        // thread stay where it now is.
        let restored = nix::sched::sched_setaffinity(this_thread, &self.allowed);
        debug_assert!(restored.is_ok(), "the affinity the thread had is allowed again");
        true
    }
}

/// The process-wide spare-core sample behind [`has_spare_core`].
struct SpareCore {
    base: Instant,
    /// /proc/stat's CPU times, once a [`SPARE_CORE_WINDOW`].
    times: Sampled<CpuTimes>,
    /// Whether the last window left [`SPARE_CORE_MIN_IDLE`] cores idle.
    spare: AtomicBool,
    ticks_per_second: u64,
    /// /proc/pressure/cpu's stall total in µs, once a [`PRESSURE_SAMPLE`].
    stall: Sampled<u64>,
    /// Nanoseconds after `base` of the end of the last sample at or above
    /// [`CALM_MAX_STALL`] (`base` itself until then).
    stalled_ns: AtomicU64,
    /// Whether a pressure sample has been measured (where
    /// /proc/pressure/cpu cannot be read, pressure never vouches for a
    /// core).
    measured: AtomicBool,
    /// Nanoseconds after `base` of the last yield that gave its core away
    /// (0: none yet).
    core_taken_ns: AtomicU64,
    /// Nanoseconds after `base` until which no core counts as spare.
    crowded_until_ns: AtomicU64,
}

impl SpareCore {
    fn new() -> SpareCore {
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let file = File::open("/proc/stat").ok();
        let first = file.as_ref().and_then(read_cpu_times).map(|times| (0, times));
        SpareCore {
            base: Instant::now(),
            times: Sampled::new(file, first),
            spare: AtomicBool::new(true),
            ticks_per_second: u64::try_from(ticks).unwrap_or(100),
            stall: Sampled::new(File::open("/proc/pressure/cpu").ok(), None),
            stalled_ns: AtomicU64::new(0),
            measured: AtomicBool::new(false),
            core_taken_ns: AtomicU64::new(0),
            crowded_until_ns: AtomicU64::new(0),
        }
    }

    /// [`note_yield`].
    fn note_yield(&self, at: Instant, took: Duration) {
        if took < CORE_TAKEN {
            // Loads first: a quick yield in a calm process writes nothing.
            if self.core_taken_ns.load(Ordering::Relaxed) != 0 {
                self.core_taken_ns.store(0, Ordering::Relaxed);
            }
            if self.crowded_until_ns.load(Ordering::Relaxed) != 0 {
                self.crowded_until_ns.store(0, Ordering::Relaxed);
            }
            return;
        }
        // At least 1, so that a yield at `base` is not read as "none yet".
        let now_ns = self.ns_at(at).max(1);
        let last = self.core_taken_ns.swap(now_ns, Ordering::Relaxed);
        if last != 0 && now_ns.saturating_sub(last) <= CROWDED_PAIR.as_nanos() as u64 {
            self.crowded_until_ns.fetch_max(now_ns + CROWDED_HOLD.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    fn answer(&self, now: Instant) -> bool {
        self.answer_with(now, read_cpu_times, read_cpu_stall_us)
    }

    /// [`SpareCore::answer`], reading the counters with `read` and the CPU
    /// stall total with `stall`.
    fn answer_with(
        &self,
        now: Instant,
        read: impl FnOnce(&File) -> Option<CpuTimes>,
        stall: impl FnOnce(&File) -> Option<u64>,
    ) -> bool {
        let now_ns = self.ns_at(now);
        self.times.sample(now_ns, SPARE_CORE_WINDOW, read, |before, times, wall_ns| {
            let wall = Duration::from_nanos(wall_ns);
            if let Some(idle) = before.idle_cores_until(&times, wall, self.ticks_per_second) {
                self.spare.store(idle >= SPARE_CORE_MIN_IDLE, Ordering::Relaxed);
            }
        });
        if now_ns < self.crowded_until_ns.load(Ordering::Relaxed) {
            return false;
        }
        self.spare.load(Ordering::Relaxed) || self.calm(now_ns, stall)
    }

    /// Whether every pressure sample over the last [`CALM_WINDOW`] stayed
    /// under [`CALM_MAX_STALL`], sampling again when one is due.
    fn calm(&self, now_ns: u64, stall: impl FnOnce(&File) -> Option<u64>) -> bool {
        self.stall.sample(now_ns, PRESSURE_SAMPLE, stall, |before_us, total_us, wall_ns| {
            let wall_us = wall_ns / 1000;
            if wall_us > 0 {
                if total_us.saturating_sub(before_us) as f64 >= CALM_MAX_STALL * wall_us as f64 {
                    self.stalled_ns.store(now_ns, Ordering::Relaxed);
                }
                self.measured.store(true, Ordering::Relaxed);
            }
        });
        self.measured.load(Ordering::Relaxed)
            && now_ns.saturating_sub(self.stalled_ns.load(Ordering::Relaxed)) >= CALM_WINDOW.as_nanos() as u64
    }

    /// Nanoseconds from `base` to `at` (0 before it).
    fn ns_at(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }
}

/// The `cpu` line of an open /proc/stat.
fn read_cpu_times(file: &File) -> Option<CpuTimes> {
    let mut buf = [0u8; 256];
    CpuTimes::parse(read_from_start(file, &mut buf)?.split('\n').next()?)
}

/// The start of an open /proc file, read anew (it is generated at each read
/// from offset 0).
fn read_from_start<'a>(file: &File, buf: &'a mut [u8; 256]) -> Option<&'a str> {
    let n = file.read_at(buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()
}

/// Microseconds some thread has waited for a core since boot: the `total`
/// of /proc/pressure/cpu's `some` line.
fn read_cpu_stall_us(file: &File) -> Option<u64> {
    let mut buf = [0u8; 256];
    parse_cpu_stall_us(read_from_start(file, &mut buf)?)
}

fn parse_cpu_stall_us(pressure: &str) -> Option<u64> {
    let some = pressure.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace().find_map(|field| field.strip_prefix("total="))?.parse().ok()
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
        if sampler.times.state.lock().file.is_none() {
            return; // No /proc/stat to stand in for.
        }
        let ticks = sampler.ticks_per_second;
        let start = Instant::now() + SPARE_CORE_WINDOW;
        let times = |idle: u64| CpuTimes { total: 0, idle, steal: 0 };
        let at = |idle: u64| move |_: &File| Some(times(idle));
        // No pressure reading: only idle time vouches for a core.
        let unread = |_: &File| None;
        sampler.times.state.lock().last = Some((sampler.ns_at(start - SPARE_CORE_WINDOW), times(0)));
        // A window where the cores were busy all along: no spare core.
        assert!(!sampler.answer_with(start, at(0), unread));
        // Within the window the answer stands, whatever a read would say.
        assert!(!sampler.answer_with(start + SPARE_CORE_WINDOW / 2, at(1_000_000), unread));
        // A window with one core idle throughout (ticks/s × window): spare.
        let window_ticks = ticks * SPARE_CORE_WINDOW.as_millis() as u64 / 1000;
        assert!(sampler.answer_with(start + SPARE_CORE_WINDOW, at(window_ticks), unread));
        // Then under half a core idle again: not spare.
        let a_third = window_ticks + window_ticks / 3;
        assert!(!sampler.answer_with(start + 2 * SPARE_CORE_WINDOW, at(a_third), unread));
        // A failed read keeps the last answer.
        assert!(!sampler.answer_with(start + 3 * SPARE_CORE_WINDOW, |_: &File| None, unread));
    }

    #[test]
    fn the_stall_total_is_the_some_lines_total() {
        let text = "some avg10=0.44 avg60=0.80 avg300=1.67 total=11844054719\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_cpu_stall_us(text), Some(11_844_054_719));
        assert_eq!(parse_cpu_stall_us("full avg10=0.00 total=5\n"), None);
        assert_eq!(parse_cpu_stall_us("some avg10=0.44\n"), None);
    }

    #[test]
    fn busy_cores_count_as_spare_only_after_a_calm_window_of_pressure_samples() {
        let sampler = SpareCore::new();
        if sampler.stall.state.lock().file.is_none() {
            return; // No /proc/pressure/cpu to stand in for.
        }
        let busy = |_: &File| Some(CpuTimes { total: 0, idle: 0, steal: 0 });
        let start = Instant::now() + SPARE_CORE_WINDOW;
        let busy_before = CpuTimes { total: 0, idle: 0, steal: 0 };
        sampler.times.state.lock().last = Some((sampler.ns_at(start - SPARE_CORE_WINDOW), busy_before));
        let after = |d: Duration| start + d;
        let us = |d: Duration| d.as_micros() as u64;
        let stall = |total: u64| move |_: &File| Some(total);
        // The first sample only sets the mark: nothing measured yet.
        assert!(!sampler.answer_with(start, busy, stall(0)));
        // Threads waited for a core half of the next sample: not spare.
        let mut t = PRESSURE_SAMPLE;
        let mut total = us(PRESSURE_SAMPLE) / 2;
        assert!(!sampler.answer_with(after(t), busy, stall(total)));
        // Under the threshold, but not yet for a whole window.
        let quiet = |d: Duration| (CALM_MAX_STALL / 2.0 * us(d) as f64) as u64;
        let crowded_at = t;
        while t < crowded_at + CALM_WINDOW - PRESSURE_SAMPLE {
            t += PRESSURE_SAMPLE;
            total += quiet(PRESSURE_SAMPLE);
            assert!(!sampler.answer_with(after(t), busy, stall(total)), "at {t:?}");
        }
        // Quiet samples for a whole window: spare, though no core was idle.
        t = crowded_at + CALM_WINDOW;
        total += quiet(PRESSURE_SAMPLE);
        assert!(sampler.answer_with(after(t), busy, stall(total)));
        // Between samples the answer stands, whatever a read would say.
        assert!(sampler.answer_with(after(t + PRESSURE_SAMPLE / 2), busy, stall(total + 1_000_000)));
        // One stalled sample ends it at once.
        t += PRESSURE_SAMPLE;
        total += us(PRESSURE_SAMPLE) / 10;
        assert!(!sampler.answer_with(after(t), busy, stall(total)));
        // A failed read keeps what the samples said before.
        assert!(!sampler.answer_with(after(t + PRESSURE_SAMPLE), busy, |_: &File| None));
    }

    #[test]
    fn two_yields_in_a_row_that_gave_the_core_away_take_the_spare_core_until_a_quick_one() {
        let sampler = SpareCore::new();
        // Idle cores vouch for a spare one whenever a window is read.
        sampler.times.state.lock().last = Some((0, CpuTimes { total: 0, idle: 0, steal: 0 }));
        let idle = |_: &File| Some(CpuTimes { total: 0, idle: u64::MAX / 2, steal: 0 });
        let at = |ms: f64| sampler.base + Duration::from_secs_f64(ms / 1e3);
        let spare_at = |ms: f64| sampler.answer_with(at(ms), idle, |_: &File| None);
        let (quick, taken) = (CORE_TAKEN / 2, CORE_TAKEN);
        let pair_ms = CROWDED_PAIR.as_secs_f64() * 1e3;
        let hold_ms = CROWDED_HOLD.as_secs_f64() * 1e3;
        assert!(spare_at(0.01), "spare until a window says otherwise");
        // Quick yields (nobody else wanted the core) change nothing.
        sampler.note_yield(at(0.02), quick);
        sampler.note_yield(at(0.03), quick);
        assert!(spare_at(0.04));
        // Two that gave it away, further apart than a pair: housekeeping.
        sampler.note_yield(at(1.0), taken);
        sampler.note_yield(at(1.0 + pair_ms + 0.001), taken);
        assert!(spare_at(1.0 + pair_ms + 0.002));
        // Two close together but with a quick one between: not in a row
        // (the first a pair's time and more after the last).
        let t = 1.0 + 2.0 * pair_ms + 1.0;
        sampler.note_yield(at(t), taken);
        sampler.note_yield(at(t + 0.01), quick);
        sampler.note_yield(at(t + 0.02), taken);
        assert!(spare_at(t + 0.03));
        // Two in a row within a pair's time: crowded for the hold, whatever
        // the idle time says...
        let crowd = t + 0.03;
        sampler.note_yield(at(crowd), 3 * taken);
        assert!(!spare_at(crowd));
        assert!(!spare_at(crowd + hold_ms - 0.001));
        // ...and then the windows' answer again.
        assert!(spare_at(crowd + hold_ms + 0.001));
        // A quick yield ends a hold at once.
        let again = crowd + hold_ms + 1.0;
        sampler.note_yield(at(again), taken);
        sampler.note_yield(at(again + 0.01), taken);
        assert!(!spare_at(again + 0.02));
        sampler.note_yield(at(again + 0.03), quick);
        assert!(spare_at(again + 0.04));
    }

    #[test]
    fn this_machine_answers_and_the_answer_holds_for_a_window() {
        let sampler = SpareCore::new();
        let start = Instant::now();
        assert!(sampler.answer(start), "spare until a window was measured");
        // Within the window the answer stands (no read happens).
        assert!(sampler.answer(start + SPARE_CORE_WINDOW / 2));
        let Some(first) = sampler.times.state.lock().last else {
            return; // No /proc/stat: the answer stays "spare".
        };
        // After a window: some answer, from a real reading.
        std::thread::sleep(SPARE_CORE_WINDOW);
        let _ = sampler.answer(Instant::now());
        let second = sampler.times.state.lock().last.expect("still readable");
        assert!(second.0 > first.0 && second.1.total >= first.1.total, "a second reading was taken");
    }

    /// Runs `body` on a thread of its own (whose affinity it may change)
    /// with that thread's mask and the CPUs the mask allows.
    fn on_a_thread_of_its_own(body: impl FnOnce(nix::sched::CpuSet, Vec<usize>) + Send + 'static) {
        std::thread::spawn(|| {
            let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
            let cpus = cpus_in(&allowed).collect();
            body(allowed, cpus);
        })
        .join()
        .expect("the thread ran");
    }

    /// Sets the calling thread's affinity to `mask`.
    fn set_mask(mask: &nix::sched::CpuSet) {
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), mask).expect("affinity set");
    }

    /// A mask of `cpu` alone.
    fn only(cpu: usize) -> nix::sched::CpuSet {
        let mut one = nix::sched::CpuSet::new();
        one.set(cpu).expect("in range");
        one
    }

    #[test]
    fn whether_a_thread_may_leave_its_cpu_is_looked_up_again_only_after_the_recheck_period() {
        on_a_thread_of_its_own(|allowed, cpus| {
            let now = Instant::now();
            assert_eq!(may_leave_cpu(now), cpus.len() >= 2, "{} CPUs allowed", cpus.len());
            set_mask(&only(cpus[0]));
            // Within the period the answer looked up stands...
            assert_eq!(may_leave_cpu(now + AFFINITY_RECHECK / 2), cpus.len() >= 2);
            // ...after it the pinned mask is seen.
            assert!(!may_leave_cpu(now + AFFINITY_RECHECK));
            set_mask(&allowed);
            assert_eq!(may_leave_cpu(now + 2 * AFFINITY_RECHECK), cpus.len() >= 2);
        });
    }

    #[test]
    fn a_thread_leaves_its_cpu_for_another_it_may_use_and_keeps_its_mask() {
        on_a_thread_of_its_own(|_, cpus| {
            // SAFETY: sched_getcpu takes no arguments.
            let here = || usize::try_from(unsafe { libc::sched_getcpu() }).expect("a CPU");
            let others = other_cpus();
            assert_eq!(others.is_some(), cpus.len() >= 2);
            if let Some(others) = others {
                let before = here();
                assert!(others.leave_current_cpu(), "{} CPUs allowed", cpus.len());
                assert_ne!(here(), before, "moved off CPU {before}");
                let after = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
                assert!(cpus.iter().all(|&c| after.is_set(c).unwrap_or(false)), "the mask is as it was");
            }
            // Allowed one CPU, it stays.
            set_mask(&only(cpus[0]));
            assert!(other_cpus().is_none());
            assert_eq!(here(), cpus[0]);
        });
    }
}
