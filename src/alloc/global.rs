//! The process's global allocator: mimalloc, entered through its plain
//! `mi_malloc` wherever the alignment asked for is one every block of that
//! size has anyway, and through `mi_malloc_aligned` only where it is not.
//!
//! Owns: the `GlobalAlloc` implementation. Must not know who allocates.
//!
//! Why not `mimalloc::MiMalloc`: it sends every allocation through
//! `mi_malloc_aligned`, whose fast path needs a block already on the
//! page's free list. When that list is empty (the blocks freed since wait
//! on the page's local list, which only the plain path collects), it
//! over-allocates for any size that is not a power of two: in a steady
//! allocate-free loop every such allocation (a 192-byte call slot, a
//! 544-byte frame head) took that path, about 200 instructions, and a
//! block of the next size class up.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use libmimalloc_sys as mi;

/// The alignment mimalloc gives every block of more than 8 bytes on 64-bit
/// targets (`MI_MAX_ALIGN_SIZE`: its size classes past 8 bytes are
/// multiples of 16 from a 16-byte aligned start), and blocks of 8 bytes or
/// fewer their own size's.
const PLAIN_ALIGN: usize = 16;

const _: () = assert!(usize::BITS == 64, "PLAIN_ALIGN is mimalloc's guarantee on 64-bit targets");

/// mimalloc, as the `#[global_allocator]`.
pub struct Mimalloc;

/// Whether a plain `mi_malloc` of `size` bytes is aligned to `align`.
#[inline]
fn plain(size: usize, align: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every entry point returns a block of at least `layout.size()`
// bytes aligned to `layout.align()` (the plain ones only where `plain`
// says mimalloc guarantees that alignment), or null on failure; blocks are
// freed only by `mi_free`, which takes any block mimalloc handed out.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions accept any size and
        // alignment a `Layout` can hold.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from one of the functions above (the caller's
        // `GlobalAlloc` contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is a live block of ours (the caller's contract);
        // the new block keeps `layout.align()`, by mimalloc's guarantee
        // where `plain` holds for the new size, else by asking for it.
        unsafe {
            if plain(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

/// A block for `layout` from mimalloc's `plain_entry` where the alignment
/// is natural (see [`plain`]), else from its `aligned_entry`. Inlined, so
/// each caller calls one of the two directly.
///
/// # Safety
/// The entries are mimalloc's: any size and power-of-two alignment.
#[inline(always)]
unsafe fn allocate(
    layout: Layout,
    plain_entry: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_entry: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: the caller's promise about the entries.
    unsafe {
        if plain(layout.size(), layout.align()) {
            plain_entry(layout.size()).cast()
        } else {
            aligned_entry(layout.size(), layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_and_alignment_comes_back_aligned_writable_and_zeroed_when_asked() {
        let allocator = Mimalloc;
        for size in [1, 7, 8, 9, 15, 16, 17, 24, 40, 48, 100, 192, 544, 4096, 70_000] {
            for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
                let layout = Layout::from_size_align(size, align).expect("a valid layout");
                // SAFETY: non-zero sizes; each block is used within its
                // size and freed once, with the layout it has then.
                unsafe {
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert!(!zeroed.is_null());
                    assert_eq!(zeroed as usize % align, 0, "zeroed {size} B at {align}");
                    assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|&b| b == 0));
                    allocator.dealloc(zeroed, layout);

                    let mut block = allocator.alloc(layout);
                    assert_eq!(block as usize % align, 0, "{size} B at {align}");
                    block.write_bytes(0xA5, size);
                    let mut current = layout;
                    // Grown, then shrunk: the bytes and the alignment kept.
                    for new_size in [size * 3, size.div_ceil(2)] {
                        let kept = current.size().min(new_size);
                        block = allocator.realloc(block, current, new_size);
                        assert_eq!(block as usize % align, 0, "{size} -> {new_size} B at {align}");
                        assert!(std::slice::from_raw_parts(block, kept).iter().all(|&b| b == 0xA5));
                        current = Layout::from_size_align(new_size, align).expect("a valid layout");
                    }
                    allocator.dealloc(block, current);
                }
            }
        }
    }
}
