//! `tf.print` as a user meets it: a frozen TensorFlow function with prints
//! (StringFormat + PrintV2, and the legacy Print) run by `ringflow run`,
//! whose stdout and stderr must hold what TensorFlow printed for the same
//! feeds.

use std::path::{Path, PathBuf};
use std::process::Command;

fn case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs").join(name)
}

#[test]
fn tf_print_writes_what_tensorflow_writes_to_stdout_and_stderr() {
    let dir = case("print_and_format_ops");
    let feed = |name: &str| format!("{name}:0={}", dir.join(format!("step0_feed_{name}_0.npy")).display());
    let out = Command::new(env!("CARGO_BIN_EXE_ringflow"))
        .args(["run", "--graph"])
        .arg(dir.join("graph.pb"))
        .args(["--feed", &feed("x"), "--feed", &feed("ids"), "--feed", &feed("words"), "--fetch", "Identity_2:0"])
        .output()
        .expect("run ringflow");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "ringflow run failed: {stdout}{stderr}");
    // TensorFlow 2.21's prints for the same graph and feeds.
    let printed_to_stderr = [
        "x: [0.333333343 0.00267118937 ... 5.01535273 -132672.828] sum -201928.719\n",
        "legacy: [[204 -869 -323][1...]...][a quote\\\"d tab\\there café...]\n",
    ];
    for line in printed_to_stderr {
        assert!(stderr.contains(line), "stderr lacks {line:?}: {stderr}");
    }
    let printed_to_stdout = "ids [[204 -869 -323]\n [1 243 972]] <-\n";
    assert!(stdout.starts_with(printed_to_stdout), "stdout: {stdout}");
    // The fetch, which waited on the prints, follows them.
    assert!(stdout.contains("Identity_2:0"), "stdout: {stdout}");
}
