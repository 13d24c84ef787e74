//! Checkpoints TensorFlow 2.21 wrote (`tools/golden/checkpoints.py`) read
//! by ringflow's bundle reader, every tensor against the value TensorFlow
//! exported beside it; and ringflow's own checkpoints read back.

use ringflow::checkpoint::{BundleReader, data_path, write_bundle};
use ringflow::tensor::npy::read_npy;
use ringflow::{DType, Tensor};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checkpoints").join(name)
}

fn assert_same(name: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.dtype(), want.dtype(), "{name}: dtype");
    assert_eq!(got.shape(), want.shape(), "{name}: shape");
    if got.dtype() == DType::String {
        assert_eq!(got.strings().unwrap().to_vec(), want.strings().unwrap().to_vec(), "{name}");
    } else {
        assert_eq!(got.as_bytes(), want.as_bytes(), "{name}: values");
    }
}

/// Every tensor of the checkpoint at `dir/model.ckpt` equals
/// `dir/expected/NAME.npy`, and nothing else is in it.
fn check_against_expected(dir: &str, names: &[&str], shards: i32) {
    let dir = fixture(dir);
    let prefix = dir.join("model.ckpt").to_string_lossy().into_owned();
    let reader = BundleReader::open(&prefix).unwrap();
    assert_eq!(reader.num_shards(), shards);
    let mut want_names: Vec<&str> = names.to_vec();
    want_names.sort_unstable();
    assert_eq!(reader.names().collect::<Vec<_>>(), want_names);
    for name in names {
        let expected = read_npy(dir.join("expected").join(format!("{}.npy", name.replace('/', "_")))).unwrap();
        let got = reader.read(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same(name, &got, &expected);
    }
}

#[test]
fn a_tensorflow_checkpoint_of_every_dtype_reads_back_its_values() {
    check_against_expected("tf_plain", &["weights", "scale", "counts", "global_step", "mask", "vocab"], 1);
}

#[test]
fn a_sharded_tensorflow_checkpoint_reads_from_both_data_files() {
    check_against_expected("tf_sharded", &["dev0/a", "dev0/s", "dev1/b", "dev1/c"], 2);
    let reader = BundleReader::open(&fixture("tf_sharded").join("model.ckpt").to_string_lossy()).unwrap();
    let shards: Vec<i32> = reader.names().map(|n| reader.entry(n).unwrap().shard_id).collect();
    assert_eq!(shards, [0, 0, 1, 1]);
}

#[test]
fn rewriting_a_tensorflow_checkpoint_gives_the_same_index_and_data() {
    // TensorFlow's bytes are the reference: written again by ringflow, the
    // same tensors make the same data file and the same index entries.
    let source = fixture("tf_plain").join("model.ckpt").to_string_lossy().into_owned();
    let reader = BundleReader::open(&source).unwrap();
    let tensors: Vec<(String, Tensor)> = reader.names().map(|n| (n.to_string(), reader.read(n).unwrap())).collect();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy").to_string_lossy().into_owned();
    let pairs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    write_bundle(&copy, &pairs).unwrap();
    assert_eq!(std::fs::read(data_path(&copy, 0, 1)).unwrap(), std::fs::read(data_path(&source, 0, 1)).unwrap());
    let again = BundleReader::open(&copy).unwrap();
    for (name, _) in &tensors {
        assert_eq!(again.entry(name).unwrap(), reader.entry(name).unwrap(), "{name}");
    }
}
