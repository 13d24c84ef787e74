//! Memory the runtime allocates on purpose: the process's global allocator,
//! 64-byte aligned I/O buffers with reference counts, and registered memory
//! regions carved into such buffers.
//!
//! Owns: the `#[global_allocator]` choice (mimalloc, for every binary and
//! test that links this crate, entered as `global` explains), [`IoBuf`], [`Mapping`] (a region's memory, anonymous
//! or shared with a peer, and its lock) and [`Region`]. Must not know about
//! frames, sockets or tensors' meaning: the transport decides what goes into
//! a buffer; tensors borrow buffers through `Tensor::from_borrowed`.
//!
//! Why buffers and not `Vec<u8>`: a received tensor points into the buffer
//! the kernel wrote, so the buffer must be 64-byte aligned, must never move,
//! and must stay alive while any tensor over it does (an `Arc<IoBuf>` is the
//! reference count). Large buffers are private anonymous mappings so that
//! memory is only resident once written and is returned to the kernel when
//! the last tensor over it drops.

mod buffer;
#[cfg(not(miri))]
mod global;
mod mapping;
mod region;

pub use buffer::{IoBuf, MMAP_THRESHOLD_BYTES};
pub use mapping::{
    Backing, HUGETLB_PAGE_BYTES, LockPolicy, Mapping, RegionError, is_hugetlb, memfd, memfd_hugetlb,
    memlock_limit_bytes,
};
pub use region::{Region, RegionOptions};

// Miri cannot run mimalloc's C code; under it the system allocator stands in.
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: global::Mimalloc = global::Mimalloc;
