//! Graphs: the model ([`spec`]), TensorFlow GraphDef import, validation,
//! pruning to a step's signature, placement on devices, and partitioning
//! into per-device graphs joined by Send/Recv.
//!
//! Owns: everything that turns a user's graph into per-device graphs an
//! executor can run. Must not run anything: no threads, no kernels' compute,
//! no sockets.

pub mod spec;

pub use spec::{
    AttrList, AttrValue, DataType, Endpoint, GraphSpec, NodeSpec, ShapeSpec, TensorValue,
};
