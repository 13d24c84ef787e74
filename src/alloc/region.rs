//! [`Region`]: one large aligned mapping, optionally locked in memory (so it
//! can be registered with io_uring as a fixed buffer), carved into equal
//! 64-byte aligned slots handed out as [`IoBuf`]s.
//!
//! Owns: the mapping, its lock, and the free list of slots. A slot returns to
//! the free list when its `IoBuf` (and so every tensor over it) drops; the
//! mapping is unmapped when the region and every slot are gone.
//!
//! Locked memory is bounded by `ulimit -l` (RLIMIT_MEMLOCK, 8 MiB on the
//! machines we measured). A region that cannot be locked is either refused
//! with a message saying how to raise the limit ([`LockPolicy::Required`]) or
//! used unlocked with a warning ([`LockPolicy::IfAllowed`]).

use super::buffer::IoBuf;
use crate::tensor::{DType, Keepalive, Shape, TENSOR_ALIGN, Tensor};
use parking_lot::Mutex;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether a region's pages are locked (pinned) in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockPolicy {
    Never,
    /// Lock when `ulimit -l` allows, otherwise warn and stay unlocked.
    IfAllowed,
    /// Lock or fail with an error that names the limit.
    Required,
}

#[derive(Debug, Clone)]
pub struct RegionOptions {
    pub bytes: usize,
    pub slot_bytes: usize,
    pub lock: LockPolicy,
}

impl Default for RegionOptions {
    fn default() -> Self {
        RegionOptions { bytes: 4 << 20, slot_bytes: 256 << 10, lock: LockPolicy::IfAllowed }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    #[error("region of {bytes} bytes with {slot_bytes}-byte slots: {reason}")]
    BadSize { bytes: usize, slot_bytes: usize, reason: &'static str },
    #[error("cannot map a region of {bytes} bytes: {source}")]
    Map { bytes: usize, source: std::io::Error },
    #[error(
        "cannot lock a region of {bytes} bytes in memory: `ulimit -l` (RLIMIT_MEMLOCK) allows {limit_desc}; \
         raise it (ulimit -l, systemd LimitMEMLOCK=, docker --ulimit memlock=) or use a smaller region \
         or LockPolicy::IfAllowed ({source})"
    )]
    Lock { bytes: usize, limit_desc: String, source: std::io::Error },
}

/// The soft RLIMIT_MEMLOCK in bytes (`None` = unlimited).
pub fn memlock_limit_bytes() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if rc != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(limit.rlim_cur)
}

static NEXT_REGION_ID: AtomicU64 = AtomicU64::new(1);

struct Mapping {
    base: NonNull<u8>,
    bytes: usize,
    slot_bytes: usize,
    locked: bool,
    id: u64,
    free_slots: Mutex<Vec<u32>>,
}

// SAFETY: the mapping is plain memory; slot ownership is tracked by the
// free list under a mutex, so two `IoBuf`s never own the same slot.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we created this mapping; every slot (which holds an Arc to
        // us) is gone, so nothing refers to the memory any more. munlock is
        // implied by munmap.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.bytes) };
    }
}

/// A slot of a region, returned to the free list on drop.
pub(crate) struct RegionSlot {
    mapping: Arc<Mapping>,
    index: u32,
}

impl RegionSlot {
    pub(crate) fn region_id(&self) -> u64 {
        self.mapping.id
    }
    pub(crate) fn offset(&self) -> usize {
        self.index as usize * self.mapping.slot_bytes
    }
}

impl Drop for RegionSlot {
    fn drop(&mut self) {
        self.mapping.free_slots.lock().push(self.index);
    }
}

/// A registered-memory region; cheap to clone (shared).
#[derive(Clone)]
pub struct Region {
    mapping: Arc<Mapping>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Region(#{}, {} bytes, {}-byte slots, {})",
            self.mapping.id,
            self.mapping.bytes,
            self.mapping.slot_bytes,
            if self.mapping.locked { "locked" } else { "unlocked" }
        )
    }
}

impl Region {
    pub fn new(options: &RegionOptions) -> Result<Region, RegionError> {
        let RegionOptions { bytes, slot_bytes, lock } = *options;
        let bad = |reason| RegionError::BadSize { bytes, slot_bytes, reason };
        if slot_bytes == 0 || slot_bytes % TENSOR_ALIGN != 0 {
            return Err(bad("slot size must be a non-zero multiple of 64"));
        }
        if bytes < slot_bytes || bytes % slot_bytes != 0 {
            return Err(bad("region size must be a multiple of the slot size"));
        }
        let slots = bytes / slot_bytes;
        if slots > u32::MAX as usize {
            return Err(bad("too many slots"));
        }
        // SAFETY: a fresh private anonymous mapping, checked for failure.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(RegionError::Map { bytes, source: std::io::Error::last_os_error() });
        }
        let base = NonNull::new(raw.cast::<u8>()).expect("mmap never returns null on success");
        let mut mapping = Mapping {
            base,
            bytes,
            slot_bytes,
            locked: false,
            id: NEXT_REGION_ID.fetch_add(1, Ordering::Relaxed),
            // Reversed so slot 0 is handed out first.
            free_slots: Mutex::new((0..slots as u32).rev().collect()),
        };
        if lock != LockPolicy::Never {
            // SAFETY: locks pages of the mapping we just created.
            let rc = unsafe { libc::mlock(raw, bytes) };
            if rc == 0 {
                mapping.locked = true;
            } else {
                let source = std::io::Error::last_os_error();
                let limit_desc = match memlock_limit_bytes() {
                    Some(limit) => format!("{limit} bytes ({} KiB)", limit / 1024),
                    None => "unlimited".to_string(),
                };
                let err = RegionError::Lock { bytes, limit_desc, source };
                if lock == LockPolicy::Required {
                    return Err(err); // `mapping` drops and unmaps.
                }
                tracing::warn!("{err}; using the region unlocked");
            }
        }
        Ok(Region { mapping: Arc::new(mapping) })
    }

    pub fn id(&self) -> u64 {
        self.mapping.id
    }
    pub fn len(&self) -> usize {
        self.mapping.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.mapping.bytes == 0
    }
    pub fn slot_bytes(&self) -> usize {
        self.mapping.slot_bytes
    }
    pub fn is_locked(&self) -> bool {
        self.mapping.locked
    }
    pub fn base_ptr(&self) -> *mut u8 {
        self.mapping.base.as_ptr()
    }
    pub fn free_slots(&self) -> usize {
        self.mapping.free_slots.lock().len()
    }

    /// The iovec that registers this whole region as one io_uring fixed
    /// buffer.
    pub fn iovec(&self) -> libc::iovec {
        libc::iovec { iov_base: self.base_ptr().cast(), iov_len: self.len() }
    }

    /// A free slot as a buffer of `slot_bytes`, or `None` when all are taken.
    pub fn alloc(&self) -> Option<IoBuf> {
        let index = self.mapping.free_slots.lock().pop()?;
        let offset = index as usize * self.mapping.slot_bytes;
        // SAFETY: offset < bytes because index < slots.
        let ptr = unsafe { NonNull::new_unchecked(self.mapping.base.as_ptr().add(offset)) };
        let slot = RegionSlot { mapping: self.mapping.clone(), index };
        Some(IoBuf::from_region_slot(ptr, self.mapping.slot_bytes, slot))
    }

    /// A tensor whose bytes live in a slot of this region (so it can be sent
    /// from registered memory), filled by `fill`. `None` when the tensor does
    /// not fit a slot, no slot is free, or `dtype` is string (whose length
    /// is not the shape's).
    pub fn alloc_tensor(
        &self,
        dtype: DType,
        shape: impl Into<Shape>,
        fill: impl FnOnce(&mut [u8]),
    ) -> Option<crate::Result<Tensor>> {
        let shape = shape.into();
        let len = shape.checked_num_elements()?.checked_mul(dtype.size()?)?;
        if len > self.slot_bytes() {
            return None;
        }
        let buf = self.alloc()?;
        // SAFETY: the slot is ours alone until it is shared below.
        fill(unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr(), len) });
        let ptr = NonNull::new(buf.as_mut_ptr()).expect("region slots are non-null");
        let keepalive: Keepalive = Arc::new(buf);
        // SAFETY: the bytes are valid for `len` reads, and nobody writes them
        // again: the only writer was `fill`, and the slot is not reused until
        // the keepalive (and so the tensor) drops.
        Some(unsafe { Tensor::from_borrowed(dtype, shape, ptr, len, keepalive) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_aligned_distinct_and_recycled() {
        let region =
            Region::new(&RegionOptions { bytes: 4 * 4096, slot_bytes: 4096, lock: LockPolicy::IfAllowed }).unwrap();
        let a = region.alloc().unwrap();
        let b = region.alloc().unwrap();
        assert_ne!(a.as_ptr(), b.as_ptr());
        assert_eq!(a.as_ptr() as usize % TENSOR_ALIGN, 0);
        assert_eq!(a.region_offset(), Some((region.id(), 0)));
        let _c = region.alloc().unwrap();
        let _d = region.alloc().unwrap();
        assert!(region.alloc().is_none(), "four slots only");
        drop(a);
        assert_eq!(region.free_slots(), 1);
        assert!(region.alloc().is_some());
        drop(b);
        // The mapping outlives the region handle while slots live.
        let slot = region.alloc().unwrap();
        drop(region);
        // SAFETY: exclusive slot, in bounds.
        unsafe { *slot.as_mut_ptr() = 1 };
    }

    #[test]
    fn tensors_live_in_region_slots() {
        let region =
            Region::new(&RegionOptions { bytes: 2 * 4096, slot_bytes: 4096, lock: LockPolicy::Never }).unwrap();
        let t = region
            .alloc_tensor(DType::I32, [4], |bytes| {
                bytes.copy_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0])
            })
            .unwrap()
            .unwrap();
        assert_eq!(t.as_slice::<i32>().unwrap(), &[1, 2, 3, 4]);
        let base = region.base_ptr() as usize;
        assert!((base..base + region.len()).contains(&(t.data_ptr() as usize)));
        assert_eq!(region.free_slots(), 1);
        drop(t);
        assert_eq!(region.free_slots(), 2);
        assert!(region.alloc_tensor(DType::F64, [1024], |_| {}).is_none());
    }

    #[test]
    fn locking_beyond_the_limit_names_the_limit() {
        let Some(limit) = memlock_limit_bytes() else {
            return; // unlimited here: nothing to exceed.
        };
        let bytes = ((limit as usize / 4096) + 16) * 4096;
        let err = Region::new(&RegionOptions { bytes, slot_bytes: 4096, lock: LockPolicy::Required });
        match err {
            Err(e @ RegionError::Lock { .. }) => {
                assert!(e.to_string().contains("ulimit -l"), "{e}")
            }
            // Running as root with CAP_IPC_LOCK lets mlock exceed the limit.
            Ok(region) => assert!(region.is_locked()),
            Err(other) => panic!("unexpected error {other}"),
        }
        let unlocked = Region::new(&RegionOptions { bytes, slot_bytes: 4096, lock: LockPolicy::IfAllowed }).unwrap();
        assert!(unlocked.alloc().is_some());
    }
}
