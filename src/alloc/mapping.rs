//! [`Mapping`]: one mapping this process made, either private anonymous
//! memory or a shared file (a memfd that a peer on this host maps too),
//! optionally locked in memory; unmapped on drop.
//!
//! Owns the mapping, locking and unmapping of laid-out memory:
//! [`Region`](super::Region) carves a mapping into equal slots, and
//! `net::shm::SharedRegion` lays a channel's rings out in one. (Large
//! [`IoBuf`](super::IoBuf)s map and recycle their own private pages.) Must
//! not know what the bytes hold or who else maps them.
//!
//! Locked memory is bounded by `ulimit -l` (RLIMIT_MEMLOCK, 8 MiB on the
//! machines we measured). A mapping that cannot be locked is either refused
//! with a message saying how to raise the limit ([`LockPolicy::Required`])
//! or used unlocked with a warning ([`LockPolicy::IfAllowed`]).

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// A fresh memfd of `bytes` bytes, closed on exec; `sealable` lets the
/// caller seal it afterwards. Errors name the call that failed.
pub fn memfd(name: &CStr, bytes: u64, sealable: bool) -> std::io::Result<OwnedFd> {
    memfd_with(name, bytes, if sealable { libc::MFD_ALLOW_SEALING } else { 0 })
}

/// The default size of the pages of a [`memfd_hugetlb`].
pub const HUGETLB_PAGE_BYTES: u64 = 2 << 20;

/// A fresh sealable memfd of `bytes` bytes (a multiple of
/// [`HUGETLB_PAGE_BYTES`]) on the host's hugetlbfs pool: its pages come
/// from the pages the administrator reserved (`vm.nr_hugepages`), and a
/// shared mapping of it reserves them all at once (mmap fails when the
/// pool is short, never a later access).
pub fn memfd_hugetlb(name: &CStr, bytes: u64) -> std::io::Result<OwnedFd> {
    memfd_with(name, bytes, libc::MFD_ALLOW_SEALING | libc::MFD_HUGETLB)
}

/// Whether `fd` is a file on hugetlbfs.
// `f_type` and the magic have different integer types on other targets.
#[allow(clippy::unnecessary_cast)]
pub fn is_hugetlb(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: `statfs` is plain data the call fills.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and out-pointer.
    unsafe { libc::fstatfs(fd.as_raw_fd(), &mut stat) == 0 && stat.f_type as i64 == libc::HUGETLBFS_MAGIC as i64 }
}

fn memfd_with(name: &CStr, bytes: u64, extra_flags: libc::c_uint) -> std::io::Result<OwnedFd> {
    let context = |op: &str, e: std::io::Error| std::io::Error::new(e.kind(), format!("{op}: {e}"));
    let flags = libc::MFD_CLOEXEC | extra_flags;
    // SAFETY: a valid C string and flags; the result is checked.
    let raw = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    if raw < 0 {
        return Err(context("memfd_create", std::io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let len = libc::off_t::try_from(bytes)
        .map_err(|_| std::io::Error::other(format!("a memfd of {bytes} bytes is too large")))?;
    // SAFETY: plain syscall on our descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(context("ftruncate", std::io::Error::last_os_error()));
    }
    Ok(fd)
}

/// Whether a mapping's pages are locked (pinned) in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockPolicy {
    Never,
    /// Lock when `ulimit -l` allows, otherwise warn and stay unlocked.
    IfAllowed,
    /// Lock or fail with an error that names the limit.
    Required,
}

/// What a mapping maps.
#[derive(Debug, Clone, Copy)]
pub enum Backing<'fd> {
    /// Private anonymous memory: resident once written.
    Anonymous,
    /// The first `bytes` of this file, shared with every other mapping of
    /// it (in this process or another).
    Shared(BorrowedFd<'fd>),
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

/// A mapping of `len` bytes at `base`, readable and writable.
pub struct Mapping {
    base: NonNull<u8>,
    bytes: usize,
    locked: bool,
}

// SAFETY: plain memory; what is stored where is the owner's protocol (a
// slot free list, a ring's indices), not the mapping's.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let locked = if self.locked { "locked" } else { "unlocked" };
        write!(f, "Mapping({} bytes at {:p}, {locked})", self.bytes, self.base)
    }
}

impl Mapping {
    /// Maps `bytes` of `backing`, then locks them as `lock` says.
    pub fn new(bytes: usize, backing: Backing<'_>, lock: LockPolicy) -> Result<Mapping, RegionError> {
        let (flags, fd) = match backing {
            Backing::Anonymous => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
            Backing::Shared(fd) => (libc::MAP_SHARED, fd.as_raw_fd()),
        };
        // SAFETY: a fresh mapping (of a file the caller holds open, for a
        // shared one), checked for failure; no existing memory is touched.
        let raw = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
        if raw == libc::MAP_FAILED {
            return Err(RegionError::Map { bytes, source: std::io::Error::last_os_error() });
        }
        let base = NonNull::new(raw.cast::<u8>()).expect("mmap never returns null on success");
        let mut mapping = Mapping { base, bytes, locked: false };
        if lock != LockPolicy::Never {
            // SAFETY: locks pages of the mapping we just created.
            if unsafe { libc::mlock(raw, bytes) } == 0 {
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
        Ok(mapping)
    }

    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub fn is_locked(&self) -> bool {
        self.locked
    }

    /// Gives the kernel `advice` (`MADV_*`) for the whole pages inside
    /// `[start, end)` of the mapping; returns the bytes advised (0 when the
    /// range holds no whole page or the kernel refused).
    ///
    /// # Safety
    /// Advice that drops pages (`MADV_REMOVE`, `MADV_DONTNEED`) makes them
    /// read as zeros: the caller must own those bytes, with nobody reading
    /// them before they are written again.
    pub unsafe fn advise(&self, start: usize, end: usize, advice: libc::c_int) -> usize {
        const PAGE: usize = 4096;
        let first = start.next_multiple_of(PAGE);
        let last = end.min(self.bytes) / PAGE * PAGE;
        if last <= first {
            return 0;
        }
        // SAFETY: a page-aligned range inside our mapping; what the advice
        // does to its contents is the caller's promise.
        let rc = unsafe { libc::madvise(self.base.as_ptr().add(first).cast(), last - first, advice) };
        if rc == 0 { last - first } else { 0 }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we created this mapping, and whoever owns the `Mapping`
        // guarantees nothing refers to its memory any more (every slot or
        // lent span holds the owner alive). munlock is implied by munmap.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    #[test]
    fn two_shared_mappings_of_one_file_see_each_others_writes() {
        // SAFETY: a valid C string; the result is checked.
        let raw = unsafe { libc::memfd_create(c"mapping-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscall on our descriptor.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 8192) }, 0);
        let a = Mapping::new(8192, Backing::Shared(fd.as_fd()), LockPolicy::Never).unwrap();
        let b = Mapping::new(8192, Backing::Shared(fd.as_fd()), LockPolicy::Never).unwrap();
        assert_ne!(a.base(), b.base());
        // SAFETY: in bounds of both mappings; one thread.
        unsafe {
            a.base().as_ptr().add(5000).write(42);
            assert_eq!(b.base().as_ptr().add(5000).read(), 42);
            // Dropping the pages of the file drops them for both.
            assert_eq!(b.advise(4096, 8192, libc::MADV_REMOVE), 4096);
            assert_eq!(a.base().as_ptr().add(5000).read(), 0);
        }
        let private = Mapping::new(4096, Backing::Anonymous, LockPolicy::IfAllowed).unwrap();
        assert_eq!(private.len(), 4096);
    }
}
