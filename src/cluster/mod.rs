//! Clusters: which tasks exist and where they listen, and how tasks and
//! devices are named.
//!
//! Owns: device names ([`DeviceName`]) and cluster specs from a file,
//! `TF_CONFIG` or a Slurm job step's environment. Must not open sockets.

pub mod device_name;
pub mod slurm;
pub mod spec;

pub use device_name::{DeviceName, task_of};
pub use spec::{ClusterSpec, TaskId};
