//! [`ChannelCache`]: one shared [`Client`] per peer address, replaced after
//! its connection dies (TensorFlow's WorkerCache idea).
//!
//! Owns: the address → client map. Connecting happens outside the map's
//! lock, so a slow peer does not hold up calls to the others.

use super::{Client, Service, TransportOptions};
use crate::error::Result;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

pub struct ChannelCache {
    options: TransportOptions,
    clients: Mutex<HashMap<String, Arc<Client>>>,
    /// Serves what peers push back on our connections (weak: the service
    /// usually owns this cache).
    inbound: OnceLock<Weak<dyn Service>>,
}

impl ChannelCache {
    pub fn new(options: TransportOptions) -> ChannelCache {
        ChannelCache { options, clients: Mutex::new(HashMap::new()), inbound: OnceLock::new() }
    }

    /// From now on, connections this cache opens hand the frames their
    /// server pushes back to `service` (see [`Client::connect_serving`]).
    /// Set once, before the first connection; later calls are ignored.
    pub fn serve_pushes_with(&self, service: Weak<dyn Service>) {
        let _ = self.inbound.set(service);
    }

    /// The live client for `addr`, connecting (or reconnecting, if the last
    /// connection died) when needed.
    pub fn get(&self, addr: &str) -> Result<Arc<Client>> {
        if let Some(client) = self.clients.lock().get(addr).cloned() {
            if client.probe_alive() {
                return Ok(client);
            }
            tracing::info!("connection to {addr} died; reconnecting");
        }
        let fresh = Arc::new(Client::connect_serving(addr, self.options.clone(), self.inbound.get().cloned())?);
        let mut clients = self.clients.lock();
        match clients.get(addr) {
            // Another thread reconnected meanwhile: share its client.
            Some(existing) if !Arc::ptr_eq(existing, &fresh) && existing.probe_alive() => Ok(existing.clone()),
            _ => {
                clients.insert(addr.to_string(), fresh.clone());
                Ok(fresh)
            }
        }
    }

    /// Forgets `addr`'s client (its calls in flight still complete).
    pub fn evict(&self, addr: &str) {
        self.clients.lock().remove(addr);
    }

    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
