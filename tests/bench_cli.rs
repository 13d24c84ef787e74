//! `ringflow bench` as a user runs it: real child processes on loopback,
//! figures printed as JSON. Checks what the figures are, never how fast.

use std::process::Command;

fn bench(args: &[&str]) -> Vec<String> {
    let out =
        Command::new(env!("CARGO_BIN_EXE_ringflow")).arg("bench").args(args).output().expect("run ringflow bench");
    assert!(out.status.success(), "bench {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

/// `ringflow bench ARGS --json`'s figures.
fn bench_figures(args: &[&str]) -> Vec<serde_json::Value> {
    bench(args).iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The figure named `name`.
fn figure<'a>(figures: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    figures.iter().find(|f| f["metric"] == name).unwrap_or_else(|| panic!("a {name} figure: {figures:?}"))
}

#[test]
fn pinned_pingpong_reports_its_figure_against_a_raw_baseline_with_the_ends_on_two_cpus() {
    let figures =
        bench_figures(&["pingpong", "--iterations", "300", "--pin-threads", "--transport", "socket", "--json"]);
    let p50 = figure(&figures, "p50_socket");
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
fn shm_pingpong_reports_one_and_two_line_calls_and_the_ring_alone_against_raw_ping_pongs() {
    let figures = bench_figures(&["pingpong", "--iterations", "300", "--transport", "shm", "--json"]);
    let metric = |m: &str| figure(&figures, m);
    let calls = [metric("p50_shm"), metric("p99_shm"), metric("p50_shm_64B")];
    let ring_alone = [metric("p50_shm_ring"), metric("p99_shm_ring")];
    for f in calls.iter().chain(&ring_alone) {
        let (value, baseline) = (f["value"].as_f64().unwrap(), f["baseline"].as_f64().unwrap());
        assert!(value > 0.0 && baseline > 0.0 && value.is_finite(), "{f}");
        assert!((f["ratio"].as_f64().unwrap() - value / baseline).abs() < 1e-6 * value / baseline, "{f}");
    }
    for f in calls {
        assert!(f["note"].as_str().unwrap().contains("raw shared-memory"), "{f}");
    }
    for f in ring_alone {
        let note = f["note"].as_str().unwrap();
        assert!(note.contains("ring alone") && note.contains("raw one-line"), "{f}");
    }
}

#[test]
fn fanout_reports_its_speedup_against_what_plain_threads_get_from_the_machine_in_the_same_run() {
    let figures = bench_figures(&["fanout", "--threads", "2", "--iterations", "20", "--json"]);
    let metric = |m: &str| figure(&figures, m);
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
    let figures = bench_figures(&["step-remote", "--iterations", "50", "--json"]);
    let metric = |m: &str| figure(&figures, m);
    let (step, relay, over) = (metric("p50"), metric("p50-raw-relay"), metric("p50-over-relay"));
    assert_eq!(relay["baseline"], step["baseline"], "both against the same raw round trip");
    let (step_us, relay_us) = (step["value"].as_f64().unwrap(), relay["value"].as_f64().unwrap());
    assert!(relay_us > 0.0 && step_us > 0.0, "{relay} {step}");
    assert!((over["value"].as_f64().unwrap() - step_us / relay_us).abs() < 1e-9, "{over}");
}

#[test]
fn while_loop_and_conv_report_per_unit_figures_with_their_direct_kernel_baselines() {
    let figures = bench_figures(&["while-loop", "conv", "--iterations", "5", "--json"]);
    for (scenario, metric, unit) in [("while-loop", "per_iteration", "ns"), ("conv", "p50", "us")] {
        let f = figures
            .iter()
            .find(|f| f["scenario"] == scenario && f["metric"] == metric)
            .unwrap_or_else(|| panic!("a {scenario} {metric} figure: {figures:?}"));
        assert_eq!(f["unit"], unit, "{f}");
        let (value, baseline) = (f["value"].as_f64().unwrap(), f["baseline"].as_f64().unwrap());
        assert!(value > 0.0 && baseline > 0.0 && value.is_finite(), "{f}");
        assert!((f["ratio"].as_f64().unwrap() - value / baseline).abs() < 1e-9, "{f}");
    }
}

#[test]
fn train_step_reports_both_models_against_the_same_graph_in_one_process() {
    let figures = bench_figures(&["train-step", "--iterations", "20", "--json"]);
    for metric in ["p50_small", "p99_small", "p50_medium", "p99_medium"] {
        let f = figures
            .iter()
            .find(|f| f["scenario"] == "train-step" && f["metric"] == metric)
            .unwrap_or_else(|| panic!("a train-step {metric} figure: {figures:?}"));
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
