//! The protobuf messages of a tensor bundle's index, as our own prost
//! structs with TensorFlow's field numbers (`tensor_bundle.proto`,
//! `versions.proto`, `tensor_slice.proto`).
//!
//! Owns: these message shapes only. Must not interpret them; `bundle` does.
//! `TensorShapeProto` is the GraphDef importer's.

pub use crate::graph::import::proto::{TensorShapeProto, VersionDef};

/// The value of the index's "" entry: how the bundle is laid out.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BundleHeaderProto {
    #[prost(int32, tag = "1")]
    pub num_shards: i32,
    /// 0 little-endian, 1 big-endian.
    #[prost(int32, tag = "2")]
    pub endianness: i32,
    #[prost(message, optional, tag = "3")]
    pub version: Option<VersionDef>,
}

pub const LITTLE_ENDIAN: i32 = 0;

/// The value of a tensor's entry: where its bytes are and what they are.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BundleEntryProto {
    /// TensorFlow's `DataType` number.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
    #[prost(int32, tag = "3")]
    pub shard_id: i32,
    #[prost(int64, tag = "4")]
    pub offset: i64,
    #[prost(int64, tag = "5")]
    pub size: i64,
    /// Masked CRC32C of the tensor's bytes in the data file.
    #[prost(fixed32, tag = "6")]
    pub crc32c: u32,
    /// Set for a tensor saved in slices (partitioned variables).
    #[prost(message, repeated, tag = "7")]
    pub slices: Vec<TensorSliceProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorSliceProto {
    #[prost(message, repeated, tag = "1")]
    pub extent: Vec<SliceExtent>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SliceExtent {
    #[prost(int64, tag = "1")]
    pub start: i64,
    #[prost(int64, optional, tag = "2")]
    pub length: Option<i64>,
}
