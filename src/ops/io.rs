//! I/O kernels: the ops `tf.compat.v1.train.Saver` puts in a graph to save
//! and restore variables in TensorFlow's checkpoint format.
//! - [`save_restore`]: `SaveV2`, `RestoreV2`, `MergeV2Checkpoints`;
//! - [`filenames`]: the string ops a sharded Saver builds its file names
//!   with: `ShardedFilename`, `ShardedFilespec`, `StringJoin` (its
//!   `StaticRegexFullMatch` is in `ops::string`);
//! - [`parse_example`]: `ParseExample`, `ParseExampleV2` (serialized
//!   `tf.train.Example`s into dense and sparse tensors).
//!
//! Owns: these kernels and their signatures. Must not know the bytes of a
//! checkpoint (that is `crate::checkpoint`) nor touch variables: a Saver
//! graph reads variables into `SaveV2` and assigns `RestoreV2`'s outputs
//! with the variable ops. Kernels keep nothing between steps but parsed
//! attributes; files are opened on every run.

pub mod filenames;
pub mod parse_example;
pub mod save_restore;
