//! The bytes behind a tensor: 64-byte aligned, immutable once shared.
//!
//! Owns: [`Storage`], which is one of three things:
//! - inline: up to [`INLINE_BYTES`] bytes stored in the tensor's own header
//!   allocation, so a scalar costs one allocation, not two;
//! - heap: an owned, 64-byte aligned allocation, zeroed or written in full
//!   by its constructor before anyone reads it;
//! - borrowed: a window into memory someone else owns (a receive buffer, a
//!   registered region, another tensor), kept alive by a reference count.
//!
//! Must not: copy bytes behind the caller's back. Every constructor that
//! takes foreign bytes says whether it copies.

use std::alloc::{self, Layout};
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

/// Alignment of every tensor's first byte.
pub const TENSOR_ALIGN: usize = 64;

/// Tensors up to this many bytes keep their data inline.
pub const INLINE_BYTES: usize = 64;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct InlineBytes([u8; INLINE_BYTES]);

const _: () = assert!(std::mem::align_of::<InlineBytes>() == TENSOR_ALIGN);

/// Something that keeps borrowed tensor memory alive.
pub type Keepalive = Arc<dyn Send + Sync>;

pub(crate) enum Storage {
    Inline { bytes: InlineBytes, len: usize },
    Heap(HeapBytes),
    Borrowed { ptr: NonNull<u8>, len: usize, _keepalive: Keepalive },
}

// SAFETY: `Storage` is only mutated through `&mut` (while its tensor is
// uniquely owned); shared access is read-only. Heap bytes are owned; borrowed
// bytes are immutable for as long as the keepalive lives, which the
// constructor's contract requires.
unsafe impl Send for Storage {}
// SAFETY: as above, `&Storage` only reads.
unsafe impl Sync for Storage {}

impl Storage {
    /// Zeroed storage of `len` bytes.
    pub(crate) fn zeroed(len: usize) -> Storage {
        if len <= INLINE_BYTES {
            Storage::Inline { bytes: InlineBytes([0; INLINE_BYTES]), len }
        } else {
            Storage::Heap(HeapBytes::zeroed(len))
        }
    }

    /// Storage of `len` bytes that `fill` writes, without zeroing them
    /// first when they live on the heap (a large kernel output or copy
    /// would otherwise pay a memset it overwrites at once).
    ///
    /// # Safety
    /// `fill` must initialise every one of the `len` bytes it is given before
    /// it returns. (If it panics instead, the bytes are freed unread.)
    pub(crate) unsafe fn written_by(len: usize, fill: impl FnOnce(&mut [MaybeUninit<u8>])) -> Storage {
        if len <= INLINE_BYTES {
            let mut s = Storage::zeroed(len);
            if let Some(bytes) = s.bytes_mut() {
                // SAFETY: initialised bytes viewed as possibly-uninitialised
                // ones; `fill` writes only initialised values into them.
                fill(unsafe { &mut *(bytes as *mut [u8] as *mut [MaybeUninit<u8>]) });
            }
            return s;
        }
        let mut heap = HeapBytes::uninit(len);
        fill(heap.uninit_bytes_mut());
        Storage::Heap(heap)
    }

    /// A copy of `src`.
    pub(crate) fn copy_of(src: &[u8]) -> Storage {
        // SAFETY: the copy writes all `src.len()` bytes; `src` cannot overlap
        // storage allocated just now.
        unsafe {
            Storage::written_by(src.len(), |dst| {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), src.len())
            })
        }
    }

    /// Borrows `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes, 64-byte aligned, and the
    /// bytes must not be written by anyone for as long as `keepalive` lives.
    pub(crate) unsafe fn borrowed(ptr: NonNull<u8>, len: usize, keepalive: Keepalive) -> Storage {
        debug_assert_eq!(ptr.as_ptr() as usize % TENSOR_ALIGN, 0);
        Storage::Borrowed { ptr, len, _keepalive: keepalive }
    }

    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Storage::Inline { bytes, len } => &bytes.0[..*len],
            Storage::Heap(heap) => heap.bytes(),
            // SAFETY: the constructor's contract: valid, immutable, alive.
            Storage::Borrowed { ptr, len, .. } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }

    /// Writable bytes, for storage this tensor owns outright.
    #[inline]
    pub(crate) fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Storage::Inline { bytes, len } => Some(&mut bytes.0[..*len]),
            Storage::Heap(heap) => Some(heap.bytes_mut()),
            Storage::Borrowed { .. } => None,
        }
    }

    pub(crate) fn is_borrowed(&self) -> bool {
        matches!(self, Storage::Borrowed { .. })
    }
}

/// An owned, 64-byte aligned allocation; initialised in full (zeroed, or
/// written by [`Storage::written_by`]'s fill) before `bytes` can be called.
pub(crate) struct HeapBytes {
    ptr: NonNull<u8>,
    len: usize,
}

impl HeapBytes {
    fn layout(len: usize) -> Layout {
        match Layout::from_size_align(len, TENSOR_ALIGN) {
            Ok(layout) => layout,
            Err(_) => panic!("tensor of {len} bytes exceeds the address space"),
        }
    }

    fn zeroed(len: usize) -> HeapBytes {
        Self::allocate(len, true)
    }

    /// Not yet initialised: only [`Storage::written_by`] makes one, and
    /// fills it before handing it on.
    fn uninit(len: usize) -> HeapBytes {
        Self::allocate(len, false)
    }

    fn allocate(len: usize, zeroed: bool) -> HeapBytes {
        assert!(len > 0, "empty tensors are stored inline");
        let layout = Self::layout(len);
        // SAFETY: layout has non-zero size.
        let raw = unsafe { if zeroed { alloc::alloc_zeroed(layout) } else { alloc::alloc(layout) } };
        let Some(ptr) = NonNull::new(raw) else { alloc::handle_alloc_error(layout) };
        HeapBytes { ptr, len }
    }

    fn uninit_bytes_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: we own `len` bytes at `ptr`; `MaybeUninit` makes no claim
        // about their contents, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<MaybeUninit<u8>>(), self.len) }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: we own `len` initialised (zeroed or written) bytes at `ptr`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HeapBytes {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` or `uninit` with this very layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_aligned_and_readable() {
        for len in [0, 1, 63, 64, 65, 4096] {
            let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let s = Storage::copy_of(&src);
            assert_eq!(s.bytes(), &src[..]);
            assert_eq!(s.bytes().as_ptr() as usize % TENSOR_ALIGN, 0, "len {len}");
        }
        let owner = Arc::new(Storage::copy_of(&[7u8; 256]));
        let ptr = NonNull::new(owner.bytes().as_ptr() as *mut u8).unwrap();
        // SAFETY: `owner` is immutable and kept alive by the keepalive.
        let borrowed = unsafe { Storage::borrowed(ptr, 128, owner.clone()) };
        assert!(borrowed.is_borrowed());
        assert_eq!(borrowed.bytes(), &[7u8; 128][..]);
        drop(owner);
        assert_eq!(borrowed.bytes()[127], 7);
    }
}
