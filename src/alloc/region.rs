//! [`Region`]: one large aligned mapping, optionally locked in memory (so it
//! can be registered with io_uring as a fixed buffer), carved into equal
//! 64-byte aligned slots handed out as [`IoBuf`]s.
//!
//! Owns: the free list of slots over one [`Mapping`]. A slot returns to
//! the free list when its `IoBuf` (and so every tensor over it) drops; the
//! mapping is unmapped when the region and every slot are gone.
//!
//! The mapping itself (anonymous, or a shared memfd, and its lock) is a
//! [`Mapping`]; [`Region::over`] carves any mapping, shared ones included.

use super::buffer::IoBuf;
use super::mapping::{Backing, LockPolicy, Mapping, RegionError};
use crate::tensor::{DType, Keepalive, Shape, TENSOR_ALIGN, Tensor};
use parking_lot::Mutex;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

static NEXT_REGION_ID: AtomicU64 = AtomicU64::new(1);

/// A mapping and its slots' free list, shared by the region's handles and
/// every slot handed out (the mapping outlives them all).
struct SlotPool {
    mapping: Mapping,
    slot_bytes: usize,
    id: u64,
    free_slots: Mutex<Vec<u32>>,
}

/// A slot of a region, returned to the free list on drop.
pub(crate) struct RegionSlot {
    mapping: Arc<SlotPool>,
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
    mapping: Arc<SlotPool>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Region(#{}, {} bytes, {}-byte slots, {})",
            self.mapping.id,
            self.mapping.mapping.len(),
            self.mapping.slot_bytes,
            if self.mapping.mapping.is_locked() { "locked" } else { "unlocked" }
        )
    }
}

impl Region {
    /// A private anonymous region, locked as `options.lock` says.
    pub fn new(options: &RegionOptions) -> Result<Region, RegionError> {
        let RegionOptions { bytes, slot_bytes, lock } = *options;
        check_sizes(bytes, slot_bytes)?;
        Region::over(Mapping::new(bytes, Backing::Anonymous, lock)?, slot_bytes)
    }

    /// Carves `mapping` (anonymous or shared) into slots of `slot_bytes`.
    pub fn over(mapping: Mapping, slot_bytes: usize) -> Result<Region, RegionError> {
        let bytes = mapping.len();
        let slots = check_sizes(bytes, slot_bytes)?;
        Ok(Region {
            mapping: Arc::new(SlotPool {
                mapping,
                slot_bytes,
                id: NEXT_REGION_ID.fetch_add(1, Ordering::Relaxed),
                // Reversed so slot 0 is handed out first.
                free_slots: Mutex::new((0..slots).rev().collect()),
            }),
        })
    }

    pub fn id(&self) -> u64 {
        self.mapping.id
    }
    pub fn len(&self) -> usize {
        self.mapping.mapping.len()
    }
    pub fn is_empty(&self) -> bool {
        self.mapping.mapping.is_empty()
    }
    pub fn slot_bytes(&self) -> usize {
        self.mapping.slot_bytes
    }
    pub fn is_locked(&self) -> bool {
        self.mapping.mapping.is_locked()
    }
    pub fn base_ptr(&self) -> *mut u8 {
        self.mapping.mapping.base().as_ptr()
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
        let ptr = unsafe { NonNull::new_unchecked(self.base_ptr().add(offset)) };
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

/// The slot count, if `bytes` and `slot_bytes` make a region.
fn check_sizes(bytes: usize, slot_bytes: usize) -> Result<u32, RegionError> {
    let bad = |reason| RegionError::BadSize { bytes, slot_bytes, reason };
    if slot_bytes == 0 || slot_bytes % TENSOR_ALIGN != 0 {
        return Err(bad("slot size must be a non-zero multiple of 64"));
    }
    if bytes < slot_bytes || bytes % slot_bytes != 0 {
        return Err(bad("region size must be a multiple of the slot size"));
    }
    u32::try_from(bytes / slot_bytes).map_err(|_| bad("too many slots"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::memlock_limit_bytes;

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
    fn a_region_over_a_shared_file_hands_out_slots_its_other_mapping_sees() {
        use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
        // SAFETY: a valid C string; the result is checked.
        let raw = unsafe { libc::memfd_create(c"region-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscall on our descriptor.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4 * 4096) }, 0);
        let shared = |lock| Mapping::new(4 * 4096, Backing::Shared(fd.as_fd()), lock).unwrap();
        let region = Region::over(shared(LockPolicy::IfAllowed), 4096).unwrap();
        let peer_view = shared(LockPolicy::Never);
        let t =
            region.alloc_tensor(DType::I32, [2], |b| b.copy_from_slice(&[7, 0, 0, 0, 9, 0, 0, 0])).unwrap().unwrap();
        let offset = t.data_ptr() as usize - region.base_ptr() as usize;
        // SAFETY: inside the peer's mapping of the same 4 pages.
        let seen = unsafe { std::slice::from_raw_parts(peer_view.base().as_ptr().add(offset), 8) };
        assert_eq!(seen, &[7, 0, 0, 0, 9, 0, 0, 0]);
        assert!(Region::over(shared(LockPolicy::Never), 3000).is_err(), "slots must be 64-byte multiples");
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
