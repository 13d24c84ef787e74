//! The executor: devices with work-stealing thread pools ([`pool`]), the
//! per-partition plan built once (`plan`) and run per step (`run`), the
//! barrier that joins a step's partitions ([`barrier`]), the rendezvous
//! where Send meets Recv ([`rendezvous`]), step state ([`step`]), and the
//! device's threads lent to one large kernel (`intra_op`).
//!
//! Owns: running graphs that are already partitioned. Must not know about
//! sockets, sessions or graph rewriting. The argument that nothing is missed
//! or left hanging is in README.md beside this file.

pub mod barrier;
pub mod cancellation;
mod compiled_loop;
mod control_flow;
pub mod cpu_list;
pub mod deadline;
pub mod device;
mod frames;
mod intra_op;
pub mod notification;
mod outcome;
mod plan;
pub mod pool;
pub mod rendezvous;
mod run;
pub mod step;

pub use barrier::{ExecutorBarrier, StepDone};
pub use cancellation::CancellationToken;
pub use device::{Device, new_incarnation};
pub use notification::Notification;
pub use pool::{PoolOptions, ThreadPool};
pub use rendezvous::{LocalRendezvous, Rendezvous, RendezvousKey};
pub use run::{EXPENSIVE_INPUT_BYTES, Executor};
pub use step::{Args, NodeStats, Retvals, StepContext, wall_clock_us};

#[cfg(test)]
mod tests;
