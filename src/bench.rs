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

/// The machine's CPU time counters from the first line of /proc/stat, in
/// clock ticks: everything, and what the hypervisor stole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    pub total: u64,
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
        (fields.len() == 8).then(|| CpuTimes { total: fields.iter().sum(), steal: fields[7] })
    }

    /// Percent of the CPU time between `self` and `later` that was stolen.
    pub fn steal_pct_until(&self, later: &CpuTimes) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| 100.0 * steal as f64 / total as f64)
    }
}

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

    /// Percentile (0..=100) in microseconds.
    pub fn percentile_us(&self, p: f64) -> f64 {
        self.histogram.value_at_percentile(p) as f64 / 1000.0
    }

    /// Percentile (0..=100) in nanoseconds.
    pub fn percentile_ns(&self, p: f64) -> f64 {
        self.histogram.value_at_percentile(p) as f64
    }
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
    fn steal_is_the_eighth_column_of_the_cpu_line() {
        let before = "cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 50 0 25 400 5 0 2 18 0 0\n";
        let after = "cpu  160 0 60 900 10 0 5 65 9 0\ncpu0 80 0 30 450 5 0 2 33 0 0\n";
        let (a, b) = (CpuTimes::parse(before).expect("parses"), CpuTimes::parse(after).expect("parses"));
        assert_eq!(a, CpuTimes { total: 1000, steal: 35 });
        assert_eq!(b.steal_pct_until(&a), None, "time does not run backwards");
        let pct = a.steal_pct_until(&b).expect("time passed");
        assert!((pct - 100.0 * 30.0 / 200.0).abs() < 1e-9, "{pct}");
        assert_eq!(CpuTimes::parse("cpu  1 2 3 4\n"), None, "a kernel without a steal column");
        assert_eq!(CpuTimes::parse("intr 5\n"), None);
    }
}
