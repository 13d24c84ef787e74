//! A device: a full name, an incarnation that changes every time the
//! process starts, and the thread pool its expensive kernels run on.
//!
//! Owns: [`Device`] and incarnation numbers. Must not own variables:
//! resource containers belong to a session (so sessions stay isolated).

use super::pool::{PoolOptions, ThreadPool};
use crate::cluster::DeviceName;
use crate::error::{Result, Status};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Device {
    pub name: DeviceName,
    /// `name` as text, computed once.
    pub name_str: String,
    pub incarnation: u64,
    pub pool: Arc<ThreadPool>,
}

/// A fresh random incarnation number (never zero).
pub fn new_incarnation() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish().max(1)
}

impl Device {
    pub fn new(name: DeviceName, pool: Arc<ThreadPool>) -> Device {
        Device { name_str: name.to_string(), name, incarnation: new_incarnation(), pool }
    }

    /// `count` CPU devices of one task, each with its own pool.
    pub fn cpus(job: &str, task: u32, count: usize, pool: &PoolOptions) -> Result<Vec<Arc<Device>>> {
        (0..count)
            .map(|i| {
                let name = DeviceName::cpu(job, 0, task, i as u32);
                // Device i's threads take the next `threads` CPUs of the list.
                let cpus = pool.cpus.as_ref().filter(|c| !c.is_empty()).map(|cpus| {
                    (0..pool.threads).map(|t| cpus[(i * pool.threads + t) % cpus.len()]).collect::<Arc<[usize]>>()
                });
                let options = PoolOptions {
                    name: format!("cpu{i}"),
                    pin_first_cpu: pool.pin_first_cpu.map(|first| first + i * pool.threads),
                    cpus,
                    ..pool.clone()
                };
                let pool = ThreadPool::new(options)
                    .map_err(|e| Status::resource_exhausted(format!("cannot start threads for {name}: {e}")))?;
                Ok(Arc::new(Device::new(name, Arc::new(pool))))
            })
            .collect()
    }
}
