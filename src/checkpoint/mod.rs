//! Checkpoints in TensorFlow's format (the V2 "tensor bundle"), so a model
//! saved by TensorFlow restores here and one saved here restores in
//! TensorFlow.
//!
//! Owns: the on-disk format only: [`table`] (the sorted-string table of the
//! index file), [`proto`] (the index's messages), [`crc`] (masked CRC32C)
//! and [`bundle`] (file names, tensor encodings, atomic writes, reads,
//! merging shards). Must not know about graphs, ops or sessions; the
//! `SaveV2`/`RestoreV2`/`MergeV2Checkpoints` kernels in `ops::io` call in.

pub mod bundle;
pub mod crc;
pub mod proto;
pub mod table;

pub use bundle::{BundleReader, data_path, index_path, merge_bundles, write_bundle};
