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

#[test]
fn shm_pingpong_reports_one_and_two_line_calls_against_the_raw_shared_memory_ping_pong() {
    let lines = bench(&["pingpong", "--iterations", "300", "--transport", "shm", "--json"]);
    let figures: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let metric =
        |m: &str| figures.iter().find(|f| f["metric"] == m).unwrap_or_else(|| panic!("a {m} figure: {lines:?}"));
    for f in [metric("p50_shm"), metric("p99_shm"), metric("p50_shm_64B")] {
        let (value, baseline) = (f["value"].as_f64().unwrap(), f["baseline"].as_f64().unwrap());
        assert!(value > 0.0 && baseline > 0.0 && value.is_finite(), "{f}");
        assert!((f["ratio"].as_f64().unwrap() - value / baseline).abs() < 1e-6 * value / baseline, "{f}");
        assert!(f["note"].as_str().unwrap().contains("raw shared-memory"), "{f}");
    }
}

#[test]
fn fanout_reports_its_speedup_against_what_plain_threads_get_from_the_machine_in_the_same_run() {
    let lines = bench(&["fanout", "--threads", "2", "--iterations", "20", "--json"]);
    let figures: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let metric =
        |m: &str| figures.iter().find(|f| f["metric"] == m).unwrap_or_else(|| panic!("a {m} figure: {lines:?}"));
    let (speedup, raw) = (metric("speedup"), metric("raw_speedup"));
    let raw_value = raw["value"].as_f64().unwrap();
    assert!(raw_value > 0.0 && raw_value.is_finite(), "{raw}");
    assert_eq!(speedup["baseline"].as_f64(), Some(raw_value), "the speedup is compared with the raw one: {speedup}");
    let ratio = speedup["ratio"].as_f64().unwrap();
    assert!((ratio - speedup["value"].as_f64().unwrap() / raw_value).abs() < 1e-9, "{speedup}");
    if std::fs::read_to_string("/proc/stat").is_ok_and(|s| s.starts_with("cpu ")) {
        for f in &figures {
            let steal = f["host_steal_pct"].as_f64().unwrap_or_else(|| panic!("host steal reported: {f}"));
            assert!((0.0..=100.0).contains(&steal), "{f}");
        }
    }
}

#[test]
fn step_remote_reports_the_bare_relay_of_its_messages_beside_the_raw_round_trip() {
    let lines = bench(&["step-remote", "--iterations", "50", "--json"]);
    let figures: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let metric =
        |m: &str| figures.iter().find(|f| f["metric"] == m).unwrap_or_else(|| panic!("a {m} figure: {lines:?}"));
    let (step, relay, over) = (metric("p50"), metric("p50-raw-relay"), metric("p50-over-relay"));
    assert_eq!(relay["baseline"], step["baseline"], "both against the same raw round trip");
    let (step_us, relay_us) = (step["value"].as_f64().unwrap(), relay["value"].as_f64().unwrap());
    assert!(relay_us > 0.0 && step_us > 0.0, "{relay} {step}");
    assert!((over["value"].as_f64().unwrap() - step_us / relay_us).abs() < 1e-9, "{over}");
}

#[test]
fn while_loop_and_conv_report_per_unit_figures_with_their_direct_kernel_baselines() {
    let lines = bench(&["while-loop", "conv", "--iterations", "5", "--json"]);
    let figures: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    for (scenario, metric, unit) in [("while-loop", "per_iteration", "ns"), ("conv", "p50", "us")] {
        let f = figures
            .iter()
            .find(|f| f["scenario"] == scenario && f["metric"] == metric)
            .unwrap_or_else(|| panic!("a {scenario} {metric} figure: {lines:?}"));
        assert_eq!(f["unit"], unit, "{f}");
        let (value, baseline) = (f["value"].as_f64().unwrap(), f["baseline"].as_f64().unwrap());
        assert!(value > 0.0 && baseline > 0.0 && value.is_finite(), "{f}");
        assert!((f["ratio"].as_f64().unwrap() - value / baseline).abs() < 1e-9, "{f}");
    }
}

#[test]
fn train_step_reports_both_models_against_the_same_graph_in_one_process() {
    let lines = bench(&["train-step", "--iterations", "20", "--json"]);
    let figures: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    for metric in ["p50_small", "p99_small", "p50_medium", "p99_medium"] {
        let f = figures
            .iter()
            .find(|f| f["scenario"] == "train-step" && f["metric"] == metric)
            .unwrap_or_else(|| panic!("a train-step {metric} figure: {lines:?}"));
        assert_eq!(f["unit"], "us", "{f}");
        let (value, baseline) = (f["value"].as_f64().unwrap(), f["baseline"].as_f64().unwrap());
        assert!(value > 0.0 && baseline > 0.0 && value.is_finite(), "{f}");
    }
}

#[test]
fn training_demo_matches_tensorflow_and_learns_on_a_ps_and_two_workers() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringflow"))
        .args(["demo", "--train", "--steps", "200"])
        .output()
        .expect("run ringflow demo --train");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("40 steps match TensorFlow"), "{stdout}");
    assert!(stdout.contains("steps/s over both workers"), "{stdout}");
}
