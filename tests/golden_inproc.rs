//! Every golden case without device pins, through the in-process session:
//! by `run`, by callables and by partial runs, each its own test.

use ringflow::cli::verify::{GoldenCase, RunMode};
use ringflow::session::{SessionOptions, create_session};
use std::path::PathBuf;

fn check(case: &str, mode: RunMode) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs").join(case);
    let golden = GoldenCase::load(&dir).unwrap();
    assert_eq!(golden.tasks_needed(), 0, "{case} is pinned to tasks; the distributed tests run it");
    let session = create_session(golden.graph.clone(), &SessionOptions::default()).unwrap();
    golden.check_with(session.as_ref(), mode).unwrap_or_else(|e| panic!("{case} ({mode:?}): {e}"));
    session.close().unwrap();
}

macro_rules! golden {
    ($($case:ident),* $(,)?) => {
        mod by_run { $( #[test] fn $case() { super::check(stringify!($case), super::RunMode::Run) } )* }
        mod by_callable { $( #[test] fn $case() { super::check(stringify!($case), super::RunMode::Callable) } )* }
        mod by_partial_run { $( #[test] fn $case() { super::check(stringify!($case), super::RunMode::Partial) } )* }
    };
}

golden!(
    add_scalar,
    array_ops,
    broadcast_reduce,
    color_and_lrn_ops,
    cond_v1,
    cond_v2,
    counter_resource_var,
    detection_ops,
    einsum_ops,
    function_call,
    function_call_stateful,
    keras_attention,
    keras_bidirectional_lstm,
    keras_causal_attention,
    keras_cnn,
    keras_conv3d,
    keras_embedding,
    keras_gru,
    keras_lstm,
    keras_mobilenet_v2,
    keras_simple_rnn,
    keras_transformer_encoder,
    keras_unet,
    linalg_ops,
    math_ops,
    mlp2_frozen,
    nd_ops,
    nn_ops,
    ref_variable,
    sequence_and_segment_ops,
    shapes,
    while_v1,
    while_v2,
);
