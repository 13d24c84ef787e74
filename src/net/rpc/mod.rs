//! Request/response and one-way pushes over the frame codec: [`Server`] +
//! [`Service`] + [`Reply`], [`Client`] + [`PendingCall`], [`ChannelCache`].
//!
//! Owns: connections, request ids, in-flight limits, the hello exchange and
//! failure reporting. Must not know what a method means: the master and
//! worker implement [`Service`] and call [`Client`].
//!
//! Failure rules: every wait has a deadline; a dead connection fails all of
//! its pending calls with `Unavailable` naming the peer; a malformed frame
//! closes its connection (reason logged) and nothing else.

mod cache;
mod client;
mod conn;
mod greeter;
pub mod handshake;
mod leader;
mod options;
mod origin;
mod server;

pub use cache::ChannelCache;
pub use client::{Client, PendingCall, Response};
pub use conn::NetError;
pub use handshake::{ClusterSecret, SECRET_FILE_ENV, SecretSetting};
pub use options::{TransportOptions, process_incarnation};
pub use server::{BackChannel, Http2Handoff, Reply, Request, SMALL_META_BYTES, Server, Service, SmallCall, SmallReply};

#[cfg(test)]
mod tests;
