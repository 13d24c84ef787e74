//! [`ChannelCache`]: one shared [`Client`] per peer address, replaced after
//! its connection dies (TensorFlow's WorkerCache idea).
//!
//! Owns: the address → client map. Connecting happens outside the map's
//! lock, so a slow peer does not hold up calls to the others.

use super::{Client, TransportOptions};
use crate::error::Result;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

pub struct ChannelCache {
    options: TransportOptions,
    clients: Mutex<HashMap<String, Arc<Client>>>,
}

impl ChannelCache {
    pub fn new(options: TransportOptions) -> ChannelCache {
        ChannelCache { options, clients: Mutex::new(HashMap::new()) }
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
        let fresh = Arc::new(Client::connect(addr, self.options.clone())?);
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
