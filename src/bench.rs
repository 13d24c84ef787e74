//! Figures that `ringflow bench` reports, and how they are printed.
//!
//! Owns: the [`Figure`] record (the JSON line format in the brief) and the
//! latency summary helpers every scenario uses. Each scenario lives beside
//! the layer it measures and returns `Vec<Figure>`.

use hdrhistogram::Histogram;
use std::time::Duration;

/// One measured figure: `{"scenario","metric","value","unit","threads",
/// "baseline"?, "ratio"?}` as a JSON line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figure {
    pub scenario: String,
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub threads: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Free-form context (baseline's nature, sizes, transport).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// Share of this machine's CPU time the hypervisor gave to others while
    /// the scenario ran (`steal` in /proc/stat), in percent: a figure taken
    /// while the host stole much is not comparable with one taken while it
    /// stole little. Absent where the kernel does not report it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_steal_pct: Option<f64>,
}

impl Figure {
    pub fn new(scenario: &str, metric: &str, value: f64, unit: &str, threads: usize) -> Figure {
        Figure {
            scenario: scenario.to_string(),
            metric: metric.to_string(),
            value,
            unit: unit.to_string(),
            threads,
            baseline: None,
            ratio: None,
            note: String::new(),
            host_steal_pct: None,
        }
    }

    /// Attaches a baseline measured in the same run; `ratio = value / baseline`.
    pub fn with_baseline(mut self, baseline: f64) -> Figure {
        self.baseline = Some(baseline);
        self.ratio = if baseline != 0.0 { Some(self.value / baseline) } else { None };
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Figure {
        self.note = note.into();
        self
    }

    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Prints figures as a table (or JSON lines).
pub fn print_figures(figures: &[Figure], json: bool) {
    if json {
        for f in figures {
            println!("{}", f.to_json_line());
        }
        return;
    }
    println!(
        "{:<18} {:<10} {:>12} {:<5} {:>7} {:>12} {:>8} {:>6}  note",
        "scenario", "metric", "value", "unit", "threads", "baseline", "ratio", "steal%"
    );
    for f in figures {
        println!(
            "{:<18} {:<10} {:>12.3} {:<5} {:>7} {:>12} {:>8} {:>6}  {}",
            f.scenario,
            f.metric,
            f.value,
            f.unit,
            f.threads,
            f.baseline.map(|b| format!("{b:.3}")).unwrap_or_default(),
            f.ratio.map(|r| format!("{r:.3}")).unwrap_or_default(),
            f.host_steal_pct.map(|s| format!("{s:.1}")).unwrap_or_default(),
            f.note
        );
    }
}

/// Above this share of stolen CPU time, `ringflow bench` warns that its
/// figures describe the host's load more than the code.
pub const STEAL_WARN_PCT: f64 = 5.0;

/// Latency samples in nanoseconds, summarised as percentiles.
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder { histogram: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds") }
    }
}

impl LatencyRecorder {
    pub fn record(&mut self, sample: Duration) {
        let ns = (sample.as_nanos() as u64).clamp(1, 60_000_000_000);
        self.histogram.saturating_record(ns);
    }

    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The mean sample in microseconds.
    pub fn mean_us(&self) -> f64 {
        self.histogram.mean() / 1000.0
    }

    /// Percentile (0..=100) in microseconds.
    pub fn percentile_us(&self, p: f64) -> f64 {
        self.histogram.value_at_percentile(p) as f64 / 1000.0
    }

    /// Percentile (0..=100) in nanoseconds.
    pub fn percentile_ns(&self, p: f64) -> f64 {
        self.histogram.value_at_percentile(p) as f64
    }
}

/// How [`interleaved`] takes turns.
#[derive(Debug, Clone, Copy)]
pub struct Turns {
    /// Timed runs per subject.
    pub iterations: usize,
    /// Runs per turn: a subject runs this many in a row before the next.
    pub block: usize,
    /// Untimed runs at the start of every turn, for at least this long
    /// (and at least one): the last subject's peers spin on for a while
    /// after their turn, and this subject's may have gone to sleep during
    /// the others' turns; both are the interleaving's own cost, not the
    /// subject's.
    pub settle: Duration,
    /// Untimed rounds of turns first, until at least this long has passed
    /// (and at least one round): a fresh cluster's first laps (rings and
    /// socket buffers filled for the first time, first allocations) are
    /// its start-up, not its steady state, and one round of short turns
    /// ends within a few milliseconds.
    pub warmup: Duration,
}

/// The warm-up the benches' turns use ([`Turns::warmup`]), as long as the
/// pingpong bench's.
pub const WARMUP: Duration = Duration::from_millis(200);

/// Something [`interleaved`] times: one run, and how long it took.
pub trait Timed<E> {
    fn run_once(&mut self) -> Result<Duration, E>;

    /// This subject's turn is over: give back what it held for it (a
    /// pinned CPU, say) before the next subject runs.
    fn turn_over(&mut self) {}
}

impl<E, F: FnMut() -> Result<Duration, E>> Timed<E> for F {
    fn run_once(&mut self) -> Result<Duration, E> {
        self()
    }
}

/// Times each subject `turns.iterations` times, the subjects taking turns
/// in blocks, so a noisy machine's slow and fast phases fall on all of
/// them alike and a ratio between them compares like with like. Untimed
/// rounds of turns come first, for [`Turns::warmup`].
pub fn interleaved<E, const N: usize>(
    mut subjects: [&mut dyn Timed<E>; N],
    turns: Turns,
) -> Result<[LatencyRecorder; N], E> {
    assert!(turns.block > 0, "a turn runs at least once");
    let mut recorders: [LatencyRecorder; N] = std::array::from_fn(|_| LatencyRecorder::default());
    let mut timed = 0;
    let mut warm = false;
    let warming = std::time::Instant::now();
    while timed < turns.iterations {
        let block = if warm { turns.block.min(turns.iterations - timed) } else { turns.block };
        for (subject, recorder) in subjects.iter_mut().zip(&mut recorders) {
            let turn = take_turn(&mut **subject, block, turns.settle, warm.then_some(recorder));
            subject.turn_over();
            turn?;
        }
        if warm {
            timed += block;
        }
        warm = warm || warming.elapsed() >= turns.warmup;
    }
    Ok(recorders)
}

fn take_turn<E>(
    subject: &mut dyn Timed<E>,
    block: usize,
    settle: Duration,
    mut recorder: Option<&mut LatencyRecorder>,
) -> Result<(), E> {
    let settling = std::time::Instant::now();
    loop {
        subject.run_once()?;
        if settling.elapsed() >= settle {
            break;
        }
    }
    for _ in 0..block {
        let took = subject.run_once()?;
        if let Some(recorder) = recorder.as_deref_mut() {
            recorder.record(took);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_and_json() {
        let f = Figure::new("pingpong", "p50", 12.0, "us", 1).with_baseline(10.0);
        assert_eq!(f.ratio, Some(1.2));
        let line = f.to_json_line();
        assert!(line.contains("\"scenario\":\"pingpong\"") && line.contains("\"ratio\":1.2"), "{line}");
        let mut r = LatencyRecorder::default();
        for us in 1..=100 {
            r.record(Duration::from_micros(us));
        }
        assert!((r.percentile_us(50.0) - 50.0).abs() < 0.5);
    }

    #[test]
    fn interleaved_subjects_take_turns_and_each_is_timed_as_often_as_asked() {
        let order = std::cell::RefCell::new(Vec::new());
        let mut a = || -> Result<Duration, ()> {
            order.borrow_mut().push('a');
            Ok(Duration::from_micros(10))
        };
        let mut b = || -> Result<Duration, ()> {
            order.borrow_mut().push('b');
            Ok(Duration::from_micros(30))
        };
        let turns = Turns { iterations: 5, block: 2, settle: Duration::ZERO, warmup: Duration::ZERO };
        let [ra, rb] = interleaved([&mut a, &mut b], turns).expect("no subject fails");
        assert_eq!((ra.len(), rb.len()), (5, 5));
        assert!((ra.percentile_us(50.0) - 10.0).abs() < 0.1 && (rb.percentile_us(50.0) - 30.0).abs() < 0.1);
        // An untimed round, then turns of 2, 2 and the 1 left, each after one warm-up run.
        let order: String = order.into_inner().into_iter().collect();
        assert_eq!(order, "aaabbbaaabbbaaabbbaabb");

        let mut failing = || -> Result<Duration, &'static str> { Err("peer died") };
        let mut fine = || -> Result<Duration, &'static str> { Ok(Duration::from_micros(1)) };
        let err = interleaved([&mut fine, &mut failing], turns).err();
        assert_eq!(err, Some("peer died"), "the first failure ends the run");
    }

    #[test]
    fn turns_are_timed_only_after_the_warm_up() {
        // Each run reports when it ran, so the smallest recorded value is
        // the first timed run's start.
        let start = std::time::Instant::now();
        let run = || -> Result<Duration, ()> {
            std::thread::sleep(Duration::from_micros(200));
            Ok(start.elapsed())
        };
        let (mut a, mut b) = (run, run);
        let warmup = Duration::from_millis(10);
        let turns = Turns { iterations: 4, block: 2, settle: Duration::ZERO, warmup };
        let [ra, rb] = interleaved([&mut a, &mut b], turns).expect("no subject fails");
        assert_eq!((ra.len(), rb.len()), (4, 4));
        // The histogram gives the top of the smallest sample's bucket, never
        // less than the sample.
        let first_timed_us = ra.percentile_us(0.0).min(rb.percentile_us(0.0));
        assert!(first_timed_us >= warmup.as_secs_f64() * 1e6, "first timed run at {first_timed_us} µs");
    }
}
