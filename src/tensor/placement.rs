//! Where the next large float tensor a kernel writes may go instead of the
//! heap: memory its consumer reads in place (a peer's shared-memory ring),
//! so that a tensor sent to another task is written once, by the kernel
//! that makes it.
//!
//! Owns: the scope ([`place_outputs`]) a caller opens around one kernel
//! call, and the one-shot hand-over to [`Tensor::build_uninit`]. Must not
//! know who provides the memory: a [`OutputPlacement`] is all it sees.
//!
//! Only `f32`/`f64` tensors of at least [`PLACE_MIN_BYTES`] take a
//! placement: the memory may be shared with a peer that can still write
//! it, and any bit pattern is a valid float (the rule received payloads
//! follow too); smaller tensors cost less to copy than to place. The
//! first such tensor the kernel writes takes it; a kernel that writes a
//! large temporary first only places that (correct, no gain), and the
//! placement's memory goes back when the temporary drops.
//!
//! [`Tensor::build_uninit`]: super::Tensor::build_uninit

use super::{DType, Keepalive};
use std::cell::Cell;
use std::ptr::NonNull;

/// Tensors smaller than this are never placed.
pub const PLACE_MIN_BYTES: usize = 64 << 10;

/// `len` bytes a tensor may be written into.
pub struct PlacedBytes {
    /// 64-byte aligned, writable, `len` bytes that nobody reads or writes
    /// until the tensor written there is handed on, and that stay valid
    /// while `keep` lives.
    pub ptr: NonNull<u8>,
    /// Dropped when the tensor over the bytes drops.
    pub keep: Keepalive,
}

/// Provides memory for a kernel's output.
pub trait OutputPlacement {
    /// `len` bytes as [`PlacedBytes`] describes, or `None` (the tensor
    /// then goes to the heap as usual).
    fn place(&self, len: usize) -> Option<PlacedBytes>;
}

/// A placement any thread may hold and ask (a connection's ring lends one).
pub type SharedPlacement = std::sync::Arc<dyn OutputPlacement + Send + Sync>;

impl std::fmt::Debug for dyn OutputPlacement + Send + Sync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputPlacement")
    }
}

thread_local! {
    static ARMED: Cell<Option<NonNull<dyn OutputPlacement + 'static>>> = const { Cell::new(None) };
}

/// Runs `f` (one kernel call) with `placement` offered to the first large
/// float tensor it writes on this thread.
pub fn place_outputs<R>(placement: &dyn OutputPlacement, f: impl FnOnce() -> R) -> R {
    struct Disarm(Option<NonNull<dyn OutputPlacement + 'static>>);
    impl Drop for Disarm {
        fn drop(&mut self) {
            ARMED.with(|armed| armed.set(self.0.take()));
        }
    }
    // SAFETY (of the lifetime erasure): the pointer is only dereferenced
    // inside `f`, while `placement` is borrowed; the guard takes it out of
    // the thread-local before this function returns or unwinds.
    let erased: NonNull<dyn OutputPlacement + 'static> =
        unsafe { std::mem::transmute::<NonNull<dyn OutputPlacement + '_>, _>(NonNull::from(placement)) };
    let _disarm = Disarm(ARMED.with(|armed| armed.replace(Some(erased))));
    f()
}

/// The armed placement's bytes for a tensor of `dtype` and `len` bytes, if
/// one is armed and it qualifies; the placement is used up either way once
/// a qualifying tensor asks.
#[inline]
pub(crate) fn take(dtype: DType, len: usize) -> Option<PlacedBytes> {
    if len < PLACE_MIN_BYTES || !matches!(dtype, DType::F32 | DType::F64) {
        return None;
    }
    take_armed(len)
}

/// Whether [`take`] would offer a placement now.
#[inline]
pub(crate) fn is_armed_for(dtype: DType, len: usize) -> bool {
    len >= PLACE_MIN_BYTES && matches!(dtype, DType::F32 | DType::F64) && ARMED.with(|armed| armed.get().is_some())
}

#[cold]
fn take_armed(len: usize) -> Option<PlacedBytes> {
    let placement = ARMED.with(|armed| armed.take())?;
    // SAFETY: armed only inside `place_outputs`, whose borrow is live.
    let placed = unsafe { placement.as_ref() }.place(len)?;
    debug_assert_eq!(placed.ptr.as_ptr() as usize % super::TENSOR_ALIGN, 0);
    Some(placed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[repr(C, align(64))]
    struct Block([u8; 64]);

    /// Hands out one heap block per call, counting calls and drops. Blocks
    /// are kept as raw pointers (a `Box` moved after its pointer was taken
    /// would invalidate that pointer) and freed with the arena.
    struct Arena {
        blocks: std::sync::Mutex<Vec<*mut [Block]>>,
        asked: AtomicUsize,
        dropped: Arc<AtomicUsize>,
    }

    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl OutputPlacement for Arena {
        fn place(&self, len: usize) -> Option<PlacedBytes> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            let block: Box<[Block]> = (0..len.div_ceil(64)).map(|_| Block([0xee; 64])).collect();
            let block = Box::into_raw(block);
            self.blocks.lock().unwrap().push(block);
            let ptr = NonNull::new(block.cast::<u8>())?;
            Some(PlacedBytes { ptr, keep: Arc::new(Dropped(self.dropped.clone())) })
        }
    }

    impl Arena {
        fn first_block(&self) -> *const u8 {
            self.blocks.lock().unwrap()[0].cast::<u8>()
        }
    }

    impl Drop for Arena {
        fn drop(&mut self) {
            for &block in self.blocks.get_mut().unwrap().iter() {
                // SAFETY: made by `Box::into_raw` in `place`, freed once; the
                // tests drop every tensor over a block before the arena.
                drop(unsafe { Box::from_raw(block) });
            }
        }
    }

    fn arena() -> Arena {
        Arena { blocks: Default::default(), asked: AtomicUsize::new(0), dropped: Arc::new(AtomicUsize::new(0)) }
    }

    #[test]
    fn the_first_large_float_tensor_in_the_scope_takes_the_placement_once() {
        let arena = arena();
        let n = PLACE_MIN_BYTES / 4;
        let (small, ints, first, second) = place_outputs(&arena, || {
            let small = Tensor::from_map([16], &[1.0f32; 16], |v| v * 2.0).unwrap();
            let ints = Tensor::from_map([n], &vec![1i32; n], |v| v + 1).unwrap();
            let first = Tensor::from_map([n], &vec![1.5f32; n], |v| v * 2.0).unwrap();
            let second = Tensor::build::<f32>([n], |out| out.fill(6.0)).unwrap();
            (small, ints, first, second)
        });
        assert_eq!(arena.asked.load(Ordering::Relaxed), 1, "small, int and later tensors do not ask");
        let placed = arena.first_block();
        assert_eq!(first.as_bytes().as_ptr(), placed, "the first large f32 tensor lies in the placement");
        assert!(first.as_slice::<f32>().unwrap().iter().all(|&v| v == 3.0));
        assert_ne!(second.as_bytes().as_ptr(), placed);
        assert!(small.as_slice::<f32>().unwrap().iter().all(|&v| v == 2.0));
        assert!(ints.as_slice::<i32>().unwrap().iter().all(|&v| v == 2));
        assert_eq!(arena.dropped.load(Ordering::Relaxed), 0);
        drop(first);
        assert_eq!(arena.dropped.load(Ordering::Relaxed), 1, "the placement's keep drops with its tensor");
        // Out of the scope nothing is placed.
        let _later = Tensor::from_map([n], &vec![1.5f32; n], |v| v * 2.0).unwrap();
        assert_eq!(arena.asked.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_tensor_built_from_zeros_takes_the_placement_zeroed() {
        let arena = arena();
        let n = PLACE_MIN_BYTES / 8;
        let built = place_outputs(&arena, || Tensor::build::<f64>([n], |out| out[1] = 2.0).unwrap());
        assert_eq!(built.as_bytes().as_ptr(), arena.first_block());
        let values = built.as_slice::<f64>().unwrap();
        assert_eq!((values[0], values[1]), (0.0, 2.0));
        assert!(values[2..].iter().all(|&v| v == 0.0), "the placement's 0xee bytes were zeroed first");
    }

    #[test]
    fn a_scope_left_by_a_panic_is_disarmed() {
        let arena = arena();
        let n = PLACE_MIN_BYTES / 4;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            place_outputs(&arena, || panic!("a kernel panicked"));
        }));
        assert!(caught.is_err());
        let _after = Tensor::from_map([n], &vec![1.5f32; n], |v| v * 2.0).unwrap();
        assert_eq!(arena.asked.load(Ordering::Relaxed), 0);
    }
}
