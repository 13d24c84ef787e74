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
        "{:<18} {:<10} {:>12} {:<5} {:>7} {:>12} {:>8}  note",
        "scenario", "metric", "value", "unit", "threads", "baseline", "ratio"
    );
    for f in figures {
        println!(
            "{:<18} {:<10} {:>12.3} {:<5} {:>7} {:>12} {:>8}  {}",
            f.scenario,
            f.metric,
            f.value,
            f.unit,
            f.threads,
            f.baseline.map(|b| format!("{b:.3}")).unwrap_or_default(),
            f.ratio.map(|r| format!("{r:.3}")).unwrap_or_default(),
            f.note
        );
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
}
