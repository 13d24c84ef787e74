//! The master: one per server process. Creates MasterSessions (discovering
//! every task's devices), and serves TensorFlow's MasterService calls on
//! them by handle.
//!
//! Owns: sessions by handle and their lifetimes. Must not run kernels: it
//! drives workers through `WorkerInterface`.

pub mod session;

pub use session::{MasterSession, RunMetadata, RunOptions, SessionConfig, TaskHandle};
