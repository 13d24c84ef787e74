//! `ringflow bench` as a user runs it: real child processes on loopback,
//! figures printed as JSON. Checks what the figures are, never how fast.

use std::process::Command;

fn bench(args: &[&str]) -> Vec<String> {
    let out =
        Command::new(env!("CARGO_BIN_EXE_ringflow")).arg("bench").args(args).output().expect("run ringflow bench");
    assert!(out.status.success(), "bench {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn pinned_pingpong_reports_its_figure_against_a_raw_baseline_with_the_ends_on_two_cpus() {
    let lines = bench(&["pingpong", "--iterations", "300", "--pin-threads", "--transport", "socket", "--json"]);
    let figures: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let p50 = figures.iter().find(|f| f["metric"] == "p50_socket").expect("a p50_socket figure");
    let value = p50["value"].as_f64().unwrap();
    let baseline = p50["baseline"].as_f64().unwrap();
    let ratio = p50["ratio"].as_f64().unwrap();
    assert!(value > 0.0 && baseline > 0.0);
    assert!((ratio - value / baseline).abs() < 1e-6 * ratio.max(1.0));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        assert!(p50["note"].as_str().unwrap().contains("client on CPU"), "{p50}");
    }
}
