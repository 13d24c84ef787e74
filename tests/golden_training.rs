//! The training golden cases (exported by `tools/golden/training.py` and,
//! for checkpoints, `tools/golden/checkpoints.py`) through the in-process
//! session: TF1 graphs as `tf.compat.v1` optimizers build them, a few steps
//! each, every loss and the final variables against TensorFlow's.

use ringflow::cli::verify::{GoldenCase, RunMode};
use ringflow::session::{SessionOptions, create_session};
use std::path::PathBuf;

fn check(case: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs").join(case);
    let golden = GoldenCase::load(&dir).unwrap();
    let session = create_session(golden.graph.clone(), &SessionOptions::default()).unwrap();
    golden.check_with(session.as_ref(), RunMode::Run).unwrap_or_else(|e| panic!("{case}: {e}"));
    session.close().unwrap();
}

#[test]
fn mlp_with_nesterov_momentum_on_ref_variables() {
    check("train_mlp_momentum_ref");
}

#[test]
fn embedding_with_adam_on_resource_variables() {
    check("train_embedding_adam_resource");
}

#[test]
fn sparse_embedding_lookups_with_adagrad_on_resource_variables() {
    check("train_sparse_embedding_adagrad_resource");
}

#[test]
fn cnn_with_batch_norm_pooling_and_momentum_on_resource_variables() {
    check("train_cnn_momentum_resource");
}

#[test]
fn softmax_regression_with_plain_gradient_descent_on_ref_variables() {
    check("train_dense_sgd_ref");
}

#[test]
fn softmax_regression_with_adagrad_on_ref_variables() {
    check("train_dense_adagrad_ref");
}

#[test]
fn softmax_regression_with_rmsprop_on_resource_variables() {
    check("train_dense_rmsprop_resource");
}

#[test]
fn saver_checkpoint_saves_and_restores_mid_training_on_ref_variables() {
    check("train_checkpoint_momentum_ref");
}

#[test]
fn rnn_in_a_v1_while_loop_whose_gradient_pops_stacks() {
    check("train_rnn_while_v1");
}

#[test]
fn rnn_in_a_v2_while_loop_whose_gradient_pops_tensor_list_accumulators() {
    check("train_rnn_while_v2");
}

#[test]
fn tf1_lstm_with_orthogonal_init_whose_gradient_adds_tensor_list_accumulators() {
    check("train_lstm_dynamic_rnn");
}

#[test]
fn every_other_tf1_optimizer_dense_and_sparse_on_ref_variables() {
    check("train_optimizer_zoo_ref");
}

#[test]
fn every_other_tf1_optimizer_dense_and_sparse_on_resource_variables() {
    check("train_optimizer_zoo_resource");
}
