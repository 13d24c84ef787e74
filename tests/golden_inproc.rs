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
    audio_spectrogram_ops,
    broadcast_reduce,
    color_and_lrn_ops,
    cond_v1,
    cond_v2,
    counter_resource_var,
    detection_ops,
    einsum_ops,
    function_call,
    function_call_stateful,
    image_projective_ops,
    image_decode_ops,
    print_and_format_ops,
    string_array_ops,
    image_resampling_ops,
    keras_attention,
    keras_bidirectional_lstm,
    keras_causal_attention,
    keras_cnn,
    keras_conv3d,
    keras_conv3d_transpose,
    conv3d_gradients,
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
    parse_example_ops,
    sparse_ops,
    feature_columns,
    numerics_and_quantization_ops,
    ctc_greedy_decoder,
    sampling_ops,
    ctc_loss_dense,
    ctc_loss_sparse,
    fft_nd_ops,
    ragged_ops,
    incomplete_gamma_beta_ops,
    gamma_poisson_sampling_ops,
    linalg_decompositions,
    sqrtm_and_tridiagonal,
    special_functions_scipy,
    keras_mixed_float16,
    keras_mixed_bfloat16,
    narrow_dtype_ops,
    quantize_dequantize_ops,
    set_ops,
    feature_crosses,
    sparse_reduce_and_add_grad,
    keras_mixed_float16_gradients,
    ref_variable,
    sequence_and_segment_ops,
    shapes,
    special_and_counting_ops,
    stateless_random_ops,
    unicode_string_ops,
    uint8_images,
    while_v1,
    while_v2,
);

/// An `Assert` whose condition is false fails the step with TensorFlow's
/// message and the failing node's name; the session then runs the next
/// step as before.
#[test]
fn a_failed_assertion_fails_its_step_and_the_session_serves_on() {
    use ringflow::session::RunOptions;
    use ringflow::tensor::{Tensor, npy::read_npy};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs/special_and_counting_ops");
    let golden = GoldenCase::load(&dir).unwrap();
    let session = create_session(golden.graph.clone(), &SessionOptions::default()).unwrap();
    let feed = |name: &str| read_npy(dir.join(format!("step0_feed_{name}_0.npy"))).unwrap();
    let checked = ["Identity_6:0".to_string()]; // "checked": pos, after assert_less(ids, 6)
    let good_ids = feed("ids");
    let mut bad = good_ids.as_slice::<i32>().unwrap().to_vec();
    bad[4] = 6;
    let bad_ids = Tensor::from_slice::<i32>(good_ids.dims(), &bad).unwrap();
    let run = |ids: Tensor| {
        let feeds = vec![("x:0".into(), feed("x")), ("ids:0".into(), ids), ("weights:0".into(), feed("weights"))];
        session.run(&RunOptions::default(), feeds, &checked, &[])
    };
    let err = run(bad_ids).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("assertion failed"), "{message}");
    assert!(message.contains("Assert"), "the error names the Assert node: {message}");
    let (out, _) = run(good_ids).unwrap();
    assert_eq!(out[0].dims(), [4, 5]);
    session.close().unwrap();
}
