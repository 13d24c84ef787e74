//! Clusters: which tasks exist and where they listen, and how tasks and
//! devices are named.
//!
//! Owns: device names ([`DeviceName`]) and, as the distributed runtime
//! lands, cluster specs from a file or `TF_CONFIG`. Must not open sockets.

pub mod device_name;
pub mod spec;

pub use device_name::{DeviceName, task_of};
pub use spec::{ClusterSpec, TaskId};
