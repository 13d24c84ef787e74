//! [`IoBuf`]: a fixed-size, 64-byte aligned byte buffer that never moves.
//!
//! Owns: the three backings (heap through the global allocator, a private
//! anonymous mapping for large buffers, a slot of a [`Region`]) and their
//! release. Must not hand out `&mut [u8]` while shared: writers go through
//! raw pointers to ranges nobody else reads, which is the caller's contract.

use super::region::RegionSlot;
use crate::tensor::TENSOR_ALIGN;
use std::alloc::Layout;
use std::ptr::NonNull;

/// Buffers at least this large are anonymous mappings, so untouched pages
/// cost no memory and freeing returns pages to the kernel at once.
pub const MMAP_THRESHOLD_BYTES: usize = 1 << 20;

const HUGE_PAGE_BYTES: usize = 2 << 20;
const SMALL_PAGE_BYTES: usize = 4096;

enum Backing {
    Heap(Layout),
    Mapped {
        map_len: usize,
        recycle: bool,
    },
    Region(RegionSlot),
    /// Memory owned elsewhere (a span of a shared-memory ring); `owner`
    /// keeps it valid and gives it back when dropped.
    Lent(#[allow(dead_code)] Box<dyn Send + Sync>),
}

/// Receive mappings kept for reuse after their last tensor drops: a
/// recycled mapping is already resident, so the next large receive takes no
/// page faults and the kernel does not zero it again. Bounded, so a burst
/// of large tensors does not pin memory.
const RECYCLE_MAX_BYTES: usize = 256 << 20;
const RECYCLE_MAX_MAPPINGS: usize = 4;

struct Recycled {
    ptr: NonNull<u8>,
    map_len: usize,
}

// SAFETY: a recycled mapping is owned by the cache alone.
unsafe impl Send for Recycled {}

static RECYCLED: parking_lot::Mutex<Vec<Recycled>> = parking_lot::Mutex::new(Vec::new());

fn take_recycled(map_len: usize) -> Option<NonNull<u8>> {
    let mut cache = RECYCLED.lock();
    let at = cache.iter().position(|r| r.map_len == map_len)?;
    Some(cache.swap_remove(at).ptr)
}

/// Keeps the mapping for reuse when there is room; `false` = caller unmaps.
fn offer_recycled(ptr: NonNull<u8>, map_len: usize) -> bool {
    let mut cache = RECYCLED.lock();
    let held: usize = cache.iter().map(|r| r.map_len).sum();
    if cache.len() >= RECYCLE_MAX_MAPPINGS || held + map_len > RECYCLE_MAX_BYTES {
        return false;
    }
    cache.push(Recycled { ptr, map_len });
    true
}

/// A 64-byte aligned buffer of fixed length, shared as `Arc<IoBuf>`.
///
/// Contents start zeroed for heap and mapped buffers; region slots hold
/// whatever their previous user wrote.
pub struct IoBuf {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: `IoBuf` is a pointer to memory it owns (or a region slot it holds
// exclusively); reads through `&IoBuf` are shared reads, and writes go through
// `as_mut_ptr` under the caller's contract that written ranges are not read
// concurrently.
unsafe impl Send for IoBuf {}
// SAFETY: as above.
unsafe impl Sync for IoBuf {}

impl IoBuf {
    /// A zeroed buffer of `len` bytes (at least one 64-byte line is
    /// reserved, so even an empty buffer has a real aligned address).
    pub fn zeroed(len: usize) -> std::io::Result<IoBuf> {
        if len >= MMAP_THRESHOLD_BYTES {
            return Self::mapped(len);
        }
        let layout = Layout::from_size_align(len.max(TENSOR_ALIGN), TENSOR_ALIGN)
            .map_err(|_| std::io::Error::other(format!("buffer of {len} bytes is too large")))?;
        // SAFETY: layout has non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::OutOfMemory, format!("cannot allocate {len} bytes"))
        })?;
        Ok(IoBuf { ptr, len, backing: Backing::Heap(layout) })
    }

    /// A buffer the kernel is about to fill completely (a receive): its
    /// initial contents are unspecified (zero or a previous receive's
    /// bytes), and large ones are recycled mappings when one fits.
    pub fn for_receive(len: usize) -> std::io::Result<IoBuf> {
        if len < MMAP_THRESHOLD_BYTES {
            return Self::zeroed(len);
        }
        // Rounded to small pages only: a huge-page round-up would make the
        // last 2 MiB of every receive resident for a few bytes.
        let map_len = len.next_multiple_of(SMALL_PAGE_BYTES);
        if let Some(ptr) = take_recycled(map_len) {
            return Ok(IoBuf { ptr, len, backing: Backing::Mapped { map_len, recycle: true } });
        }
        let mut buf = Self::map(len, map_len)?;
        buf.backing = Backing::Mapped { map_len, recycle: true };
        Ok(buf)
    }

    fn mapped(len: usize) -> std::io::Result<IoBuf> {
        Self::map(len, len.next_multiple_of(SMALL_PAGE_BYTES))
    }

    fn map(len: usize, map_len: usize) -> std::io::Result<IoBuf> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched. The result is checked against MAP_FAILED.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            return Err(std::io::Error::new(err.kind(), format!("cannot map a {len}-byte buffer: {err}")));
        }
        let ptr = NonNull::new(raw.cast::<u8>()).expect("mmap never returns null on success");
        debug_assert_eq!(ptr.as_ptr() as usize % TENSOR_ALIGN, 0);
        if map_len >= HUGE_PAGE_BYTES {
            // Transparent huge pages: a 64 MiB receive takes 32 page faults
            // instead of 16384 (the kernel writes every page of it once).
            // Only advice: failure (THP disabled) changes nothing else.
            // SAFETY: advice on the mapping we just created.
            unsafe { libc::madvise(raw, map_len, libc::MADV_HUGEPAGE) };
        }
        Ok(IoBuf { ptr, len, backing: Backing::Mapped { map_len, recycle: false } })
    }

    /// A buffer over `len` bytes at `ptr` that `owner` keeps valid until it
    /// drops (with this buffer's last handle).
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay valid for reads and for the writes the
    /// caller makes under [`as_mut_ptr`](Self::as_mut_ptr)'s contract while
    /// `owner` lives, and `ptr` must be 64-byte aligned.
    pub unsafe fn lent(ptr: NonNull<u8>, len: usize, owner: Box<dyn Send + Sync>) -> IoBuf {
        assert_eq!(ptr.as_ptr() as usize % TENSOR_ALIGN, 0, "lent buffers are 64-byte aligned");
        IoBuf { ptr, len, backing: Backing::Lent(owner) }
    }

    pub(super) fn from_region_slot(ptr: NonNull<u8>, len: usize, slot: RegionSlot) -> IoBuf {
        debug_assert_eq!(ptr.as_ptr() as usize % TENSOR_ALIGN, 0);
        IoBuf { ptr, len, backing: Backing::Region(slot) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Pointer for writing.
    ///
    /// Callers must only write ranges that no reader (slice, tensor) covers
    /// at the same time; that is what makes the `unsafe` reads sound.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes in `range`.
    ///
    /// # Safety
    /// Nobody may write `range` while the returned slice lives.
    pub unsafe fn slice(&self, start: usize, len: usize) -> &[u8] {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "range {start}+{len} outside buffer of {}",
            self.len
        );
        // SAFETY: in bounds (checked above), initialised (zeroed or written),
        // and not written concurrently per this function's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) }
    }

    /// True when `ptr` lies inside this buffer (for no-copy checks).
    pub fn contains(&self, ptr: *const u8) -> bool {
        let base = self.ptr.as_ptr() as usize;
        (base..base + self.len.max(1)).contains(&(ptr as usize))
    }

    /// The registered region this buffer is a slot of, with the offset of
    /// the slot inside it: lets io_uring use fixed-buffer operations.
    pub fn region_offset(&self) -> Option<(u64, usize)> {
        match &self.backing {
            Backing::Region(slot) => Some((slot.region_id(), slot.offset())),
            _ => None,
        }
    }

    /// Whether the memory is lent by another owner (a shared-memory ring).
    pub fn is_lent(&self) -> bool {
        matches!(self.backing, Backing::Lent(_))
    }

    pub fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped { .. })
    }
}

impl Drop for IoBuf {
    fn drop(&mut self) {
        match &self.backing {
            // SAFETY: allocated in `zeroed` with exactly this layout.
            Backing::Heap(layout) => unsafe { std::alloc::dealloc(self.ptr.as_ptr(), *layout) },
            Backing::Mapped { map_len, recycle } => {
                if *recycle && offer_recycled(self.ptr, *map_len) {
                    return;
                }
                // SAFETY: the mapping was created in `mapped` with this length
                // and nothing refers to it once the last `IoBuf` handle drops.
                let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), *map_len) };
                debug_assert_eq!(rc, 0, "munmap of an owned mapping failed");
            }
            // The slot goes back to its region when `RegionSlot` drops; lent
            // memory goes back to its owner when the owner drops.
            Backing::Region(_) | Backing::Lent(_) => {}
        }
    }
}

impl std::fmt::Debug for IoBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.backing {
            Backing::Heap(_) => "heap",
            Backing::Mapped { .. } => "mapped",
            Backing::Region(_) => "region",
            Backing::Lent(_) => "lent",
        };
        write!(f, "IoBuf({kind}, {} bytes at {:p})", self.len, self.ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_mappings_are_recycled() {
        let len = MMAP_THRESHOLD_BYTES * 3 + 5;
        let first = IoBuf::for_receive(len).unwrap();
        let addr = first.as_ptr();
        drop(first);
        // Another test may take it concurrently; only check when we got it.
        let second = IoBuf::for_receive(len).unwrap();
        if second.as_ptr() == addr {
            assert!(second.is_mapped());
        }
        assert_eq!(second.len(), len);
    }

    #[test]
    fn heap_and_mapped_buffers_are_aligned_zeroed_and_writable() {
        for len in [0, 1, 100, 4096, MMAP_THRESHOLD_BYTES, MMAP_THRESHOLD_BYTES + 1] {
            let buf = IoBuf::zeroed(len).unwrap();
            assert_eq!(buf.as_ptr() as usize % TENSOR_ALIGN, 0, "len {len}");
            assert_eq!(buf.is_mapped(), len >= MMAP_THRESHOLD_BYTES);
            if len > 0 {
                // SAFETY: exclusive access in this test; in bounds.
                unsafe { *buf.as_mut_ptr().add(len - 1) = 7 };
                // SAFETY: no concurrent writer.
                let bytes = unsafe { buf.slice(0, len) };
                assert_eq!(bytes[len - 1], 7);
                assert!(bytes[..len - 1].iter().all(|&b| b == 0));
                assert!(buf.contains(bytes.as_ptr()));
            }
        }
    }
}
