//! Graphs: the model ([`spec`]), TensorFlow GraphDef import ([`import`]),
//! validation ([`validate`]), pruning to a step's signature ([`prune`](mod@prune)),
//! placement on devices ([`place`](mod@place)), and partitioning into per-device (or
//! per-task) graphs joined by Send/Recv ([`partition`](mod@partition)).
//!
//! Owns: everything that turns a user's graph into graphs an executor can
//! run. Must not run anything: no threads, no kernel computation, no sockets.

pub mod builder;
pub mod control_loop;
pub mod function;
pub mod import;
mod op_defs;
pub mod partition;
pub mod place;
pub mod prune;
pub mod saved_model;
pub mod spec;
pub(crate) mod tf_tensor;
pub mod validate;

pub use import::{graph_from_pb_bytes, graph_to_pb_bytes, load_graph};
pub use partition::{PartitionOptions, partition, rendezvous_key};
pub use place::place;
pub use prune::{ClientGraph, prune};
pub use spec::{AttrList, AttrValue, DataType, Endpoint, GraphSpec, NodeSpec, ShapeSpec, TensorValue};
pub use validate::{Graph, NodeId, resolve_node};

#[cfg(test)]
mod tests;
