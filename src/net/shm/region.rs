//! [`SharedRegion`]: one memfd-backed mapping holding both directions of a
//! channel (control lines, slots, data rings), and the passing of its
//! descriptor over a Unix-domain socket (SCM_RIGHTS).
//!
//! Owns: the memfd (created by the connecting side, sealed against
//! shrinking and growing so the peer cannot make our accesses fault; on
//! hugetlbfs when asked and the host's pool holds it, whole huge pages
//! reserved at mapping and never punched), the
//! layout, and the mapping's lifetime: it is unmapped when the channel and
//! every span lent out of it are gone (each lent span holds the `Arc`).
//! The mapping itself is an `alloc::Mapping` (which owns mmap, mlock
//! and madvise), the same type `alloc::Region` carves into slots. Must not
//! interpret ring contents (`ring.rs` does).
//!
//! Layout (offsets from the mapping's base; all page aligned but the
//! control blocks):
//! ```text
//! 0      header: magic, version, slots, capacity, token, total bytes
//! 1024   RingControl, client → server
//! 2048   RingControl, server → client
//! 4096   slots client → server | slots server → client (512 B each)
//!        data ring client → server   | data ring server → client
//! ```

use super::ring::{RingControl, RingMemory, SLOT_BYTES, Slot};
use crate::alloc::{Backing, LockPolicy, Mapping};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

const MAGIC: u64 = u64::from_le_bytes(*b"RFLWSHM1");
/// 2: slots carry their own publish word and small frames inline.
/// 3: the holds line lists ranges of lent spans, up to `ring::HOLDS`.
/// 4: inline frames carry a compact head (`shm::INLINE_HEAD_BYTES`).
/// 5: a reader's wait note has a line of its own (`ring::WaitNoteLine`).
const LAYOUT_VERSION: u32 = 5;
const PAGE: u64 = 4096;
const CONTROL_OFFSETS: [u64; 2] = [1024, 2048];
// Each direction's control block ends before the next one (or the slots).
const _: () = assert!(std::mem::size_of::<RingControl>() as u64 <= CONTROL_OFFSETS[1] - CONTROL_OFFSETS[0]);
const _: () = assert!(CONTROL_OFFSETS[1] + std::mem::size_of::<RingControl>() as u64 <= PAGE);
/// Bounds on what a peer may ask us to map.
pub const MAX_SLOTS: u32 = 1 << 16;
pub const MAX_CAPACITY: u64 = 1 << 40;

/// The header at the region's start, written by its creator.
#[repr(C)]
struct RegionHeader {
    magic: u64,
    version: u32,
    slots: u32,
    capacity: u64,
    token: [u64; 2],
    total: u64,
}

/// Which direction of the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ClientToServer = 0,
    ServerToClient = 1,
}

/// Where everything lies, computed from the two sizes alone (each side
/// computes it itself; nothing in the header is trusted for addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub slots: u32,
    pub capacity: u64,
    descriptors: [u64; 2],
    data: [u64; 2],
    pub total: u64,
}

impl Layout {
    pub fn new(slots: u32, capacity: u64) -> Result<Layout, String> {
        if !slots.is_power_of_two() || slots > MAX_SLOTS {
            return Err(format!("{slots} descriptor slots: not a power of two up to {MAX_SLOTS}"));
        }
        if capacity == 0 || capacity % PAGE != 0 || capacity > MAX_CAPACITY {
            return Err(format!(
                "data ring of {capacity} bytes: not a non-zero multiple of {PAGE} up to {MAX_CAPACITY}"
            ));
        }
        let descriptor_bytes = (u64::from(slots) * SLOT_BYTES as u64).next_multiple_of(PAGE);
        let descriptors = [PAGE, PAGE + descriptor_bytes];
        let data0 = PAGE + 2 * descriptor_bytes;
        let data = [data0, data0 + capacity];
        Ok(Layout { slots, capacity, descriptors, data, total: data0 + 2 * capacity })
    }

    /// The file a hugetlbfs region needs: whole huge pages.
    pub fn hugetlb_bytes(&self) -> u64 {
        self.total.next_multiple_of(crate::alloc::HUGETLB_PAGE_BYTES)
    }
}

/// A mapped region. Unmapped on drop.
pub struct SharedRegion {
    mapping: Mapping,
    layout: Layout,
    token: [u64; 2],
    /// On hugetlbfs: its pages were reserved when mapped, and are never
    /// punched (a page punched and faulted again could find the pool
    /// empty, and the access would fault with SIGBUS).
    hugetlb: bool,
}

// SAFETY: the mapping is shared memory accessed only through the ring
// protocol (atomics for indices, disjoint spans for data).
unsafe impl Send for SharedRegion {}
// SAFETY: as above.
unsafe impl Sync for SharedRegion {}

impl std::fmt::Debug for SharedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedRegion({} bytes at {:p})", self.layout.total, self.mapping.base())
    }
}

impl SharedRegion {
    /// Creates, sizes, seals and maps a fresh memfd; returns the region
    /// and the descriptor to pass to the peer.
    pub fn create(layout: Layout, token: [u64; 2]) -> std::io::Result<(SharedRegion, OwnedFd)> {
        let fd = crate::alloc::memfd(c"ringflow-shm", layout.total, true)?;
        Self::seal_and_map(fd, layout, token)
    }

    /// As [`create`](Self::create), on the host's pool of huge pages
    /// (hugetlbfs, `vm.nr_hugepages`): the file is the layout rounded up
    /// to whole 2 MiB pages, all reserved when mapped. Fails, naming the
    /// pool, when the pool is short or absent.
    pub fn create_hugetlb(layout: Layout, token: [u64; 2]) -> std::io::Result<(SharedRegion, OwnedFd)> {
        let bytes = layout.hugetlb_bytes();
        let fd =
            crate::alloc::memfd_hugetlb(c"ringflow-shm", bytes).map_err(|e| with_context("a hugetlbfs memfd", e))?;
        Self::seal_and_map(fd, layout, token).map_err(|e| {
            let free = huge_pages_free_bytes() >> 20;
            with_context(&format!("{} MiB of huge pages, {free} MiB free (vm.nr_hugepages)", bytes >> 20), e)
        })
    }

    fn seal_and_map(fd: OwnedFd, layout: Layout, token: [u64; 2]) -> std::io::Result<(SharedRegion, OwnedFd)> {
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: plain fcntl on our descriptor.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(with_context("sealing", std::io::Error::last_os_error()));
        }
        let region = Self::map(fd.as_fd(), layout, token)?;
        let header = RegionHeader {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            slots: layout.slots,
            capacity: layout.capacity,
            token,
            total: layout.total,
        };
        // SAFETY: the header lies at the start of our fresh mapping, which is
        // larger than it and page aligned; nobody else has the fd yet.
        unsafe { std::ptr::write(region.mapping.base().as_ptr().cast::<RegionHeader>(), header) };
        Ok((region, fd))
    }

    /// Maps a region a peer passed, after checking that the file is sealed
    /// against size changes, has exactly the size the layout needs, and
    /// carries the header the offer promised.
    pub fn open(fd: &OwnedFd, layout: Layout, token: [u64; 2]) -> Result<SharedRegion, String> {
        // SAFETY: plain fcntl on a descriptor we own.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        let needed = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        if seals < 0 || seals & needed != needed {
            return Err("the region is not sealed against shrinking and growing".into());
        }
        // SAFETY: `stat` is plain data the call fills.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and out-pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            return Err(format!("fstat: {}", std::io::Error::last_os_error()));
        }
        // A hugetlbfs file holds whole huge pages: the layout rounded up.
        let size = match crate::alloc::is_hugetlb(fd.as_fd()) {
            true => layout.hugetlb_bytes(),
            false => layout.total,
        };
        if stat.st_size as u64 != size {
            return Err(format!("region is {} bytes, its offer said {}", stat.st_size, layout.total));
        }
        let region = Self::map(fd.as_fd(), layout, token).map_err(|e| e.to_string())?;
        // SAFETY: the header lies inside the mapping (total >= one page); it
        // is copied out before it is compared.
        let header = unsafe { std::ptr::read_volatile(region.mapping.base().as_ptr().cast::<RegionHeader>()) };
        let expected = (MAGIC, LAYOUT_VERSION, layout.slots, layout.capacity, token, layout.total);
        if (header.magic, header.version, header.slots, header.capacity, header.token, header.total) != expected {
            return Err("the region's header does not match its offer".into());
        }
        Ok(region)
    }

    /// Maps the file unlocked: its data rings are touched only as frames
    /// use them, and `ulimit -l` (8 MiB here) could not hold 2 × 160 MiB.
    /// The control page and the slot rings are faulted in at once.
    fn map(fd: BorrowedFd<'_>, layout: Layout, token: [u64; 2]) -> std::io::Result<SharedRegion> {
        let hugetlb = crate::alloc::is_hugetlb(fd);
        // A hugetlbfs mapping covers whole huge pages.
        let bytes = match hugetlb {
            true => layout.hugetlb_bytes(),
            false => layout.total,
        };
        let len = usize::try_from(bytes).map_err(|_| std::io::Error::other("region too large"))?;
        let mapping = Mapping::new(len, Backing::Shared(fd), LockPolicy::Never)
            .map_err(|e| std::io::Error::other(format!("mmap: {e}")))?;
        if !hugetlb {
            // Advice only (shmem huge pages are often off): fewer page
            // faults for large rings when allowed.
            // SAFETY: MADV_HUGEPAGE leaves the contents as they are.
            unsafe { mapping.advise(0, len, libc::MADV_HUGEPAGE) };
            // The control page and both slot rings take a write every
            // frame: faulted in now, the first lap's page faults (128
            // pages a direction) stay off a new connection's first frames.
            // Where the kernel lacks the advice (before 5.14) they fault
            // as they are first used.
            // SAFETY: MADV_POPULATE_WRITE maps pages without changing what
            // they hold.
            unsafe { mapping.advise(0, layout.data[0] as usize, libc::MADV_POPULATE_WRITE) };
        }
        Ok(SharedRegion { mapping, layout, token, hugetlb })
    }

    /// Whether the region lies on hugetlbfs pages.
    pub fn is_hugetlb(&self) -> bool {
        self.hugetlb
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn token(&self) -> [u64; 2] {
        self.token
    }

    /// Returns the whole pages inside `[start, end)` of `direction`'s data
    /// ring to the kernel (they read as zeros when next touched), for both
    /// processes: the memfd's pages themselves are freed. The caller owns
    /// those bytes (the ring's free space, under the producer's lock).
    pub fn punch(&self, direction: Direction, start: u64, end: u64) -> u64 {
        if self.hugetlb {
            return 0;
        }
        let data = self.layout.data[direction as usize];
        let (first, last) = (data + start, data + end.min(self.layout.capacity));
        // SAFETY: inside the data ring (`end` clamped to it); MADV_REMOVE
        // drops the pages, which the caller owns and nobody reads before
        // writing again.
        unsafe { self.mapping.advise(first as usize, last as usize, libc::MADV_REMOVE) as u64 }
    }

    /// The mapping's first byte (for tests that play a hostile peer).
    pub(crate) fn base(&self) -> *mut u8 {
        self.mapping.base().as_ptr()
    }

    /// One direction's memory.
    pub fn ring(&self, direction: Direction) -> RingMemory {
        let at = |offset: u64| self.mapping.base().as_ptr().wrapping_add(offset as usize);
        let d = direction as usize;
        RingMemory {
            control: at(CONTROL_OFFSETS[d]).cast::<RingControl>().cast_const(),
            slots_base: at(self.layout.descriptors[d]).cast::<Slot>(),
            slots: u64::from(self.layout.slots),
            data: at(self.layout.data[d]),
            capacity: self.layout.capacity,
        }
    }
}

fn with_context(op: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{op}: {e}"))
}

/// Mappings of channel regions this process holds (from /proc/self/maps):
/// for leak checks.
pub fn mapped_regions() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|maps| maps.lines().filter(|l| l.contains("memfd:ringflow-shm")).count())
        .unwrap_or(0)
}

/// The kernel's huge-page policy for shared memory (the bracketed word of
/// `/sys/kernel/mm/transparent_hugepage/shmem_enabled`), which decides
/// whether the ring's `MADV_HUGEPAGE` advice is taken: `always`,
/// `within_size` and `advise` take it, `never` and `deny` refuse it.
pub fn shmem_huge_policy() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").ok()?;
    parse_huge_policy(&text)
}

fn parse_huge_policy(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let len = text[start..].find(']')?;
    Some(text[start..start + len].to_string())
}

/// Whether rings made under `policy` get 2 MiB pages when large enough.
pub fn huge_policy_takes_advice(policy: &str) -> bool {
    matches!(policy, "always" | "within_size" | "advise" | "force")
}

/// How this process's mappings of channel regions are paged: resident
/// bytes, and how many of them are mapped as 2 MiB pages (from
/// /proc/self/smaps; zeros where it cannot be read).
pub fn region_pages() -> (u64, u64) {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return (0, 0) };
    let (mut resident, mut huge, mut inside) = (0u64, 0u64, false);
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if !first.ends_with(':') {
            // A mapping's header line: its address range, then its name last.
            inside = line.contains("memfd:ringflow-shm");
            continue;
        }
        let kib = || words.clone().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) << 10;
        match first {
            "Rss:" if inside => resident += kib(),
            "ShmemPmdMapped:" if inside => huge += kib(),
            // Hugetlbfs pages are counted apart from Rss.
            "Shared_Hugetlb:" | "Private_Hugetlb:" if inside => {
                resident += kib();
                huge += kib();
            }
            _ => {}
        }
    }
    (resident, huge)
}

/// Free bytes in the host's pool of 2 MiB huge pages (hugetlbfs,
/// `vm.nr_hugepages`), from /proc/meminfo: 0 without one.
pub fn huge_pages_free_bytes() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        let value = meminfo.lines().find_map(|l| l.strip_prefix(name))?;
        value.split_whitespace().next()?.parse::<u64>().ok()
    };
    match (field("HugePages_Free:"), field("Hugepagesize:")) {
        (Some(pages), Some(2048)) => pages << 21,
        _ => 0,
    }
}

/// Sends `fd` over a connected Unix socket, with one byte of data.
pub fn send_fd(socket: RawFd, fd: RawFd) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let data = [1u8];
    let iov = [std::io::IoSlice::new(&data)];
    let fds = [fd];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(socket, &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None).map_err(std::io::Error::from)?;
    Ok(())
}

/// Receives one descriptor sent by [`send_fd`]; `None` when none came.
pub fn recv_fd(socket: RawFd) -> std::io::Result<Option<OwnedFd>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut data = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut data)];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let msg =
        recvmsg::<()>(socket, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC).map_err(std::io::Error::from)?;
    let mut received = None;
    for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                // SAFETY: the kernel installed this descriptor for us.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                if received.is_none() {
                    received = Some(owned); // extra ones close on drop
                }
            }
        }
    }
    Ok(received)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_region_opens_only_with_its_own_offer() {
        let layout = Layout::new(16, 8192).unwrap();
        let (region, fd) = SharedRegion::create(layout, [1, 2]).unwrap();
        assert_eq!(
            region.layout().total,
            4096 + 2 * (16 * 512) + 2 * 8192,
            "header page, two slot arrays, two data rings"
        );
        let other = SharedRegion::open(&fd, layout, [1, 2]).unwrap();
        assert!(SharedRegion::open(&fd, layout, [1, 3]).unwrap_err().contains("header"));
        let bigger = Layout::new(16, 16384).unwrap();
        assert!(SharedRegion::open(&fd, bigger, [1, 2]).unwrap_err().contains("bytes"));
        // Both mappings see the same memory.
        let a = region.ring(Direction::ClientToServer);
        let b = other.ring(Direction::ClientToServer);
        // SAFETY: in-bounds byte of the data ring; no concurrent access.
        unsafe {
            *a.data = 42;
            assert_eq!(*b.data, 42);
        }
        // SAFETY: plain ftruncate; the seal refuses it.
        assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0, "sealed against shrinking");
        assert!(Layout::new(3, 8192).is_err());
        assert!(Layout::new(16, 100).is_err());
    }

    /// On a host with a pool of huge pages the region is whole huge pages,
    /// opened by the peer, never punched; without one, creating it fails
    /// naming the pool.
    #[test]
    fn a_hugetlb_region_is_whole_huge_pages_or_refused_naming_the_pool() {
        let layout = Layout::new(16, 64 << 10).unwrap();
        match SharedRegion::create_hugetlb(layout, [3, 4]) {
            Ok((region, fd)) => {
                assert!(region.is_hugetlb());
                // SAFETY: `stat` is plain data the call fills; valid fd.
                let mut stat: libc::stat = unsafe { std::mem::zeroed() };
                assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) }, 0);
                assert_eq!(stat.st_size as u64, 2 << 20, "the layout rounded up to a whole huge page");
                let other = SharedRegion::open(&fd, layout, [3, 4]).unwrap();
                assert!(other.is_hugetlb());
                let (a, b) = (region.ring(Direction::ServerToClient), other.ring(Direction::ServerToClient));
                // SAFETY: in-bounds byte of the data ring; no concurrent access.
                unsafe {
                    *a.data.add(100) = 7;
                    assert_eq!(*b.data.add(100), 7);
                }
                assert_eq!(region.punch(Direction::ServerToClient, 0, 64 << 10), 0, "hugetlbfs pages stay");
                // SAFETY: as above.
                assert_eq!(unsafe { *b.data.add(100) }, 7);
            }
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("nr_hugepages") || text.contains("hugetlbfs"), "{text}");
            }
        }
    }

    #[test]
    fn the_huge_page_policy_is_the_bracketed_word() {
        let policy = parse_huge_policy("always within_size [advise] never deny force\n").unwrap();
        assert_eq!(policy, "advise");
        assert!(huge_policy_takes_advice(&policy));
        assert!(!huge_policy_takes_advice(&parse_huge_policy("always [never]").unwrap()));
        assert_eq!(parse_huge_policy("always never"), None);
    }

    #[test]
    fn resident_region_pages_are_counted_from_smaps() {
        let layout = Layout::new(16, 1 << 21).unwrap();
        let (region, _fd) = SharedRegion::create(layout, [7, 8]).unwrap();
        let ring = region.ring(Direction::ServerToClient);
        // SAFETY: the whole data ring is ours to write; no peer maps it.
        unsafe { std::ptr::write_bytes(ring.data, 1, ring.capacity as usize) };
        let (resident, huge) = region_pages();
        assert!(resident >= ring.capacity, "{resident} resident bytes after writing {}", ring.capacity);
        assert!(huge <= resident);
    }

    #[test]
    fn descriptors_cross_a_unix_socket() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let layout = Layout::new(16, 8192).unwrap();
        let (_region, fd) = SharedRegion::create(layout, [5, 6]).unwrap();
        send_fd(a.as_raw_fd(), fd.as_raw_fd()).unwrap();
        let got = recv_fd(b.as_raw_fd()).unwrap().unwrap();
        SharedRegion::open(&got, layout, [5, 6]).unwrap();
    }
}
