//! The shared-memory channel between two tasks on one host: frames cross
//! as one-sided writes into a memfd region both processes map, with no
//! kernel on the data path; the TCP connection stays open for liveness
//! (the peer's death is its socket's end) and for frames too large for the
//! ring.
//!
//! Owns: the channel ([`ShmChannel`]: writing an outgoing frame into the
//! peer-visible ring, decoding a received one, and lending a kernel ring
//! memory for an output it will send: [`ShmChannel::output_placement`])
//! and the options; its setup after the hello is `negotiate.rs`. Must not
//! know what a request means, and must not touch the hello. `rpc::conn`
//! decides when to use the channel; the layers above never see which path
//! a frame took.
//!
//! The seam: the connection needs only "place this frame (or a small
//! one's parts, encoded in place) where the peer reads it", "the next
//! frame, or wait" and "wake the reader". An RDMA
//! verbs backend implements the same three over registered memory regions
//! (see `src/net/README.md`).

pub mod doorbell;
mod encode;
#[doc(hidden)]
pub mod fuzzing;
pub mod line;
mod negotiate;
pub mod region;
pub mod ring;
#[cfg(test)]
mod tests;
pub mod watch;

use crate::alloc::IoBuf;
use crate::net::frame::{
    FrameError, FrameHeader, FrameKind, FrameLimits, FrameParts, HEADER_BYTES, OutgoingFrame, PayloadPart,
    PayloadParts, ReceivedFrame,
};
use crate::tensor::Tensor;
use crate::tensor::placement::{OutputPlacement, PlacedBytes, SharedPlacement};
pub(crate) use encode::inline_len;
pub use encode::{INLINE_HEAD_BYTES, inline_frame_bytes};
use encode::{decode_inline_head, payloads_may_stay_in_the_ring, write_frame, write_inline, write_payloads};
pub use line::{LINE_HEAD_BYTES, LINE_META_BYTES, LineFrame, LineMeta};
pub(crate) use line::{line_fits, line_len};
pub use negotiate::{CONNECTING, DECLINED, MAPPED, ShmAnswer, ShmOffer, host_identity};
pub(crate) use negotiate::{ControlChannel, answer_offer, is_control, negotiate_client};
use parking_lot::Mutex;
use region::{Direction, SharedRegion};
use ring::{Consumer, InlineForm, Producer, Received, RingError};
use smallvec::SmallVec;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Frames up to this size are copied out of the ring on receipt and their
/// span released at once: a small tensor kept for long (a variable) then
/// holds no ring space, and the copy costs less than a cache miss per line.
pub const SMALL_FRAME_COPY_BYTES: u64 = 4096;

/// How often a sender waiting for ring space checks that the peer's socket
/// is still open; also how long a reader sleeps between such checks when
/// the channel watch (`watch.rs`) is not running.
pub const LIVENESS_SLICE: Duration = Duration::from_millis(10);

/// How long a sender waits for the reader to release ring space before a
/// frame goes over the socket instead.
pub const SPACE_WAIT: Duration = Duration::from_millis(5);

/// Failure points tests can force, to check the fallback to TCP.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmFault {
    /// `memfd_create` fails.
    Memfd,
    /// The Unix-domain socket cannot be bound or connected.
    UnixSocket,
}

/// Shared-memory options (part of `TransportOptions`).
#[derive(Debug, Clone)]
pub struct ShmOptions {
    /// Offer (client) or accept (server) a shared-memory channel when the
    /// peer is on this host. Default: on, unless `RINGFLOW_TRANSPORT` names
    /// a TCP transport (`tcp`, `uring`, `socket`).
    pub enabled: bool,
    /// Bytes of each direction's data ring (page multiple). Memory is
    /// touched only as frames use it.
    pub ring_bytes: u64,
    /// Descriptor slots per direction (a power of two): frames in flight.
    pub slots: u32,
    #[doc(hidden)]
    /// After a frame that reached past the ring's first
    /// [`TRIM_KEEP_BYTES`], once this side has sent nothing that large for
    /// this long, the ring's free pages past them go back to the kernel
    /// (`Duration::ZERO`: never).
    pub trim_after: Duration,
    /// Let a kernel whose output is sent over this channel write it
    /// straight into the peer's ring (`tensor::placement`), so it crosses
    /// without a copy. Default: on, unless `RINGFLOW_SHM_IN_PLACE=0`.
    pub write_in_place: bool,
    /// Make the rings this side offers of the host's reserved huge pages
    /// (hugetlbfs, `vm.nr_hugepages`): 2 MiB pages where
    /// `shmem_enabled` refuses them to ordinary shared memory. The whole
    /// region is reserved when mapped and never trimmed; without enough
    /// pages the rings use regular pages (one log line). Default: off,
    /// unless `RINGFLOW_SHM_HUGETLB=1`.
    pub hugetlb: bool,
    pub fault: Option<ShmFault>,
}

impl Default for ShmOptions {
    fn default() -> Self {
        ShmOptions {
            enabled: enabled_by_env(),
            ring_bytes: 160 << 20,
            slots: 1024,
            trim_after: Duration::from_secs(5),
            write_in_place: write_in_place_by_env(),
            hugetlb: hugetlb_by_env(),
            fault: None,
        }
    }
}

/// The first bytes of each data ring, which stay resident through trims:
/// small frames and the large frames of a busy connection reuse them.
pub const TRIM_KEEP_BYTES: u64 = 8 << 20;

/// `RINGFLOW_TRANSPORT=tcp` (or a TCP driver's name) turns shared memory off.
pub fn enabled_by_env() -> bool {
    match std::env::var("RINGFLOW_TRANSPORT") {
        Ok(v) => !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "tcp" | "uring" | "io_uring" | "io-uring" | "socket" | "sockets" | "fallback"
        ),
        Err(_) => true,
    }
}

/// `RINGFLOW_SHM_HUGETLB=1` makes the rings this process offers of huge
/// pages from the host's hugetlbfs pool.
pub fn hugetlb_by_env() -> bool {
    std::env::var("RINGFLOW_SHM_HUGETLB").is_ok_and(|v| v.trim() == "1")
}

/// `RINGFLOW_SHM_IN_PLACE=0` makes every sent tensor a copy into the ring.
pub fn write_in_place_by_env() -> bool {
    std::env::var("RINGFLOW_SHM_IN_PLACE").map_or(true, |v| v.trim() != "0")
}

/// Which end of the channel this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// The receiving end's state: the consumer, how many frames it owes the
/// socket (a via-socket marker was taken, its frame not yet read), and the
/// buffer the last inline frame was copied into.
pub(crate) struct RxState {
    pub(crate) consumer: Consumer,
    pub(crate) socket_frames_due: usize,
    /// Until when the reader yields from the first round of a wait: it
    /// found the peer's reader waiting on its core (`ShmChannel::note_waiting`).
    pub(crate) shares_core_until: Option<std::time::Instant>,
    /// Until when the reader notes each wait at once: a yield in one of
    /// its waits gave its core to another thread (`rpc::conn::DESCHEDULED`).
    pub(crate) contended_until: Option<std::time::Instant>,
    inline_buf: InlineBuf,
}

/// The buffer inline frames are copied out into, reused while nothing
/// else holds it: a call's request or response is usually dropped before
/// the next one arrives, so a small round trip allocates nothing. One
/// still held (a kept request, a tensor over its bytes) is left to its
/// holders and a fresh buffer takes its place.
struct InlineBuf(Option<Arc<IoBuf>>);

impl InlineBuf {
    /// Bytes of an inline frame's body at most (a slot less the compact
    /// head), rounded to whole lines.
    const BYTES: usize = (ring::INLINE_BYTES - INLINE_HEAD_BYTES).next_multiple_of(64);

    /// A buffer of [`Self::BYTES`] that nobody else holds.
    fn take(&mut self) -> Result<Arc<IoBuf>, FrameError> {
        // Counts read rather than `Arc::get_mut`'s compare-exchange (a
        // locked instruction on the receive path of every small frame):
        // with one strong and no weak reference, ours, nobody else can
        // reach the buffer, and the fence orders their last reads (before
        // their `Release` decrement) before our writes.
        if let Some(buf) = self.0.as_ref()
            && Arc::strong_count(buf) == 1
            && Arc::weak_count(buf) == 0
        {
            std::sync::atomic::fence(Ordering::Acquire);
            return Ok(buf.clone());
        }
        let fresh = Arc::new(
            IoBuf::for_receive(Self::BYTES).map_err(|e| FrameError::Alloc(Self::BYTES as u64, e.to_string()))?,
        );
        self.0 = Some(fresh.clone());
        Ok(fresh)
    }
}

/// The receiving end's state, for one reader at a time: a connection is
/// read by one thread at a time by construction (a client's leader, who
/// holds its reader lock, or a server's serving thread), so this is never
/// contended, and it unlocks with a plain `Release` store rather than a
/// mutex's locked instruction, which would sit on the path of every
/// received frame.
pub(crate) struct ReaderCell<T> {
    busy: AtomicBool,
    state: std::cell::UnsafeCell<T>,
}

// SAFETY: the state is reached only through a guard, and `busy` admits one
// guard at a time (its `Acquire` swap pairs with the last guard's
// `Release` store), so `T` moves between threads, never shared.
unsafe impl<T: Send> Sync for ReaderCell<T> {}

impl<T> ReaderCell<T> {
    pub(crate) fn new(state: T) -> ReaderCell<T> {
        ReaderCell { busy: AtomicBool::new(false), state: std::cell::UnsafeCell::new(state) }
    }

    /// The state, once no other reader holds it (by construction nobody
    /// does; a second reader would spin, yielding once the host has no
    /// spare core, until the first is done).
    pub(crate) fn lock(&self) -> ReaderGuard<'_, T> {
        if self.busy.swap(true, Ordering::Acquire) {
            // Only a contended lock reads the clock (about 35 ns here).
            let start = Instant::now();
            while self.busy.swap(true, Ordering::Acquire) {
                crate::net::io::spin_pause(start);
            }
        }
        ReaderGuard { cell: self }
    }
}

pub(crate) struct ReaderGuard<'a, T> {
    cell: &'a ReaderCell<T>,
}

impl<T> std::ops::Deref for ReaderGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (`lock`), so nothing else
        // reaches the state while it lives.
        unsafe { &*self.cell.state.get() }
    }
}

impl<T> std::ops::DerefMut for ReaderGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as `deref`, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.cell.state.get() }
    }
}

impl<T> Drop for ReaderGuard<'_, T> {
    fn drop(&mut self) {
        self.cell.busy.store(false, Ordering::Release);
    }
}

/// One connection's shared-memory channel, both directions.
pub struct ShmChannel {
    region: Arc<SharedRegion>,
    tx: Arc<TxSide>,
    pub(crate) rx: ReaderCell<RxState>,
    /// The direction this side reads (its doorbell wakes our reader).
    rx_direction: Direction,
    /// Set, and our reader woken, when the peer's socket hangs up.
    hangup: Arc<watch::HangupSignal>,
    /// The socket's place in the hang-up watch, once watched.
    watched: Option<watch::Watched>,
    /// The consumer's progress (`Producer::consumer_progress`) when a wait
    /// for ring space last ran out (`NOT_STALLED` when none): while the
    /// reader releases nothing, a frame that does not fit goes straight
    /// over the socket. Spans the reader keeps leave room between them
    /// (the ring places frames around every one it lends), but they can
    /// leave no gap large enough; waiting `SPACE_WAIT` for every frame
    /// then would cost more than the socket.
    stalled_at_progress: AtomicU64,
    stats: ChannelStats,
    limits: FrameLimits,
    write_in_place: bool,
    placement: SharedPlacement,
}

const NOT_STALLED: u64 = u64::MAX;

/// The bit of a wait note (`ring::WaitNoteLine`) saying that the noting
/// reader's affinity allows it no other CPU.
const NOTE_STAYS: u32 = 1 << 31;

/// What [`ShmChannel::note_waiting`] found: the peer's reader waits on our
/// reader's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharedCore {
    /// Ours is the reader that should move off it (the other yields).
    pub moves: bool,
}

/// What one channel sent (also counted process-wide in `crate::counters`).
#[derive(Debug, Default)]
struct ChannelStats {
    /// Frames through the ring and bytes copied in: added to on every
    /// send, under the producer lock (`crate::counters::ShmSent`).
    sent: crate::counters::ShmSentHandle,
    frames_in_place: AtomicU64,
    bytes_in_place: AtomicU64,
    socket_frames: AtomicU64,
    space_stalls: AtomicU64,
    bytes_copied_out: AtomicU64,
}

/// A channel's sent frames: through the ring, over the socket instead,
/// and waits for ring space that ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShmStats {
    pub frames: u64,
    /// Of `frames`, those whose tensor a kernel wrote into the ring itself
    /// (split frames: nothing copied).
    pub frames_in_place: u64,
    /// Payload bytes that crossed in spans their kernels wrote.
    pub bytes_in_place: u64,
    /// Bytes copied into the ring when sent: frames copied whole, and a
    /// split frame's head and the payloads no kernel wrote there.
    pub bytes_copied: u64,
    pub socket_frames: u64,
    pub space_stalls: u64,
    /// Received: payload bytes this side copied out of the ring on arrival
    /// instead of lending them, as the spans it already lent made
    /// [`ring::HOLDS`] ranges or most of the ring (`Consumer::should_copy_out`).
    pub bytes_copied_out: u64,
}

impl std::fmt::Debug for ShmChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShmChannel({:?})", self.region)
    }
}

/// Where [`ShmChannel::try_place`] put a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placed {
    /// Written and published.
    Sent,
    /// No descriptor slot is free: the reader is behind.
    NoSlot,
    /// A slot is free but no data space: the frame may go over the socket
    /// (after [`ShmChannel::publish_via_socket`]). `too_large` when it can
    /// never fit the ring.
    NoSpace { too_large: bool },
}

/// What the channel's reader found.
pub(crate) enum Polled {
    Frame(ReceivedFrame),
    /// The next frame is on the socket.
    ViaSocket,
    Empty,
}

/// A failure of the channel, turned into a connection error by the caller.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    #[error("shared-memory ring: {0}")]
    Ring(#[from] RingError),
    #[error("shared-memory frame: {0}")]
    Frame(#[from] FrameError),
}

impl ShmChannel {
    /// `trim_after`: see [`ShmOptions::trim_after`].
    pub fn new(region: SharedRegion, side: Side, limits: FrameLimits, trim_after: Duration) -> ShmChannel {
        let (send, receive) = match side {
            Side::Client => (Direction::ClientToServer, Direction::ServerToClient),
            Side::Server => (Direction::ServerToClient, Direction::ClientToServer),
        };
        let region = Arc::new(region);
        // SAFETY: the ring memory lies in `region`, which the channel (and
        // every lent span) keeps mapped; this side drives only its producer
        // end of one direction and its consumer end of the other.
        let (producer, consumer) = unsafe { (Producer::new(region.ring(send)), Consumer::new(region.ring(receive))) };
        // The pages a trim keeps, or a quarter of a small ring.
        let prefix = TRIM_KEEP_BYTES.min(region.layout().capacity / 4);
        let producer = producer.keeping_to(prefix);
        let tx = Arc::new(TxSide {
            producer: Mutex::new(producer),
            region: region.clone(),
            direction: send,
            trim_after,
            last_large_ns: AtomicU64::new(0),
            trim_scheduled: AtomicBool::new(false),
        });
        ShmChannel {
            hangup: Arc::new(watch::HangupSignal::new(region.clone(), receive)),
            tx: tx.clone(),
            region,
            rx: ReaderCell::new(RxState {
                consumer,
                socket_frames_due: 0,
                shares_core_until: None,
                contended_until: None,
                inline_buf: InlineBuf(None),
            }),
            rx_direction: receive,
            watched: None,
            stalled_at_progress: AtomicU64::new(NOT_STALLED),
            stats: ChannelStats::default(),
            limits,
            write_in_place: true,
            placement: Arc::new(RingPlacement { tx: tx.clone() }),
        }
    }

    /// Whether kernels may write tensors sent here into the ring
    /// ([`ShmOptions::write_in_place`]).
    pub fn writing_in_place(mut self, on: bool) -> ShmChannel {
        self.write_in_place = on;
        self
    }

    /// Memory in the peer's ring for a kernel's output that this channel
    /// will send (`None` when writing in place is off).
    pub fn output_placement(&self) -> Option<SharedPlacement> {
        self.write_in_place.then(|| self.placement.clone())
    }

    pub fn stats(&self) -> ShmStats {
        use Ordering::Relaxed;
        ShmStats {
            frames: self.stats.sent.frames(),
            frames_in_place: self.stats.frames_in_place.load(Relaxed),
            bytes_in_place: self.stats.bytes_in_place.load(Relaxed),
            bytes_copied: self.stats.sent.bytes_copied(),
            socket_frames: self.stats.socket_frames.load(Relaxed),
            space_stalls: self.stats.space_stalls.load(Relaxed),
            bytes_copied_out: self.stats.bytes_copied_out.load(Relaxed),
        }
    }

    /// Whether the last wait for ring space ran out and the reader has
    /// released nothing since (so waiting again is pointless).
    pub(crate) fn ring_stalled(&self) -> bool {
        let at = self.stalled_at_progress.load(Ordering::Acquire);
        at != NOT_STALLED && at == self.tx.producer.lock().consumer_progress()
    }

    /// A wait for ring space ran out.
    pub(crate) fn note_space_stall(&self) {
        let progress = self.tx.producer.lock().consumer_progress();
        self.stalled_at_progress.store(progress, Ordering::Release);
        self.stats.space_stalls.fetch_add(1, Ordering::Relaxed);
        crate::counters::count_shm_space_stall();
    }

    /// Puts the connection's socket in the hang-up watch, so that the
    /// reader may sleep without a timeout. On failure (logged) the reader
    /// keeps checking the socket itself between bounded sleeps.
    pub(crate) fn watch_socket(&mut self, socket: std::os::fd::RawFd) {
        match watch::watch_socket(socket, self.hangup.clone()) {
            Ok(watched) => self.watched = Some(watched),
            Err(e) => tracing::warn!("shared-memory channel: {e}; its reader checks the socket every 10 ms"),
        }
    }

    /// Whether a hang-up of the peer's socket wakes the reader.
    pub(crate) fn hangup_watched(&self) -> bool {
        self.watched.is_some() && watch::running()
    }

    /// Whether the peer's socket hung up (seen by the watch).
    pub(crate) fn peer_hung_up(&self) -> bool {
        self.hangup.hung_up()
    }

    /// Our reader waits for a frame (past its pure phase, or on a core it
    /// lately found shared): notes the CPU it waits on where the peer's
    /// reader looks (and whether it `stays` there: its affinity allows no
    /// other), and says whether the peer's reader waits, noted so, on that
    /// same CPU. Then the two threads share one core, and each one's
    /// spinning only keeps the other from the frame it is about to send
    /// (`rpc::conn::SHARED_CORE_HOLD`). `None` where the CPU is unknown or
    /// differs. The note has a line of its own ([`ring::WaitNoteLine`]),
    /// and a short wait writes none: a note costs a store, a fence and a
    /// load of the peer's line. A peer can write anything here; what it
    /// wins is our yielding or moving.
    pub(crate) fn note_waiting(&self, stays: bool) -> Option<SharedCore> {
        // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
        let cpu = u32::try_from(unsafe { libc::sched_getcpu() }).ok()?;
        let mine = (cpu.wrapping_add(1) & !NOTE_STAYS) | if stays { NOTE_STAYS } else { 0 };
        self.region.ring(self.rx_direction).wait_note().store(mine, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
        let theirs = self.region.ring(self.tx.direction).wait_note().load(Ordering::Relaxed);
        (theirs & !NOTE_STAYS == mine & !NOTE_STAYS).then(|| {
            // One side moves, so that the two cannot swap cores: the
            // client's, unless its reader stays where it is; then the
            // server's, unless it stays too.
            let peer_stays = theirs & NOTE_STAYS != 0;
            let client = self.rx_direction == Direction::ServerToClient;
            SharedCore { moves: !stays && (client || peer_stays) }
        })
    }

    /// The wait [`note_waiting`](Self::note_waiting) noted is over.
    pub(crate) fn note_wait_over(&self) {
        self.region.ring(self.rx_direction).wait_note().store(0, Ordering::Relaxed);
    }

    /// Writes `frame` into the peer's ring if there is room now (the one
    /// write of its bytes: into the slot itself when it fits, else into the
    /// data ring), publishes it and rings the doorbell when the peer may
    /// sleep. The caller holds the connection's send lock.
    pub(crate) fn try_place(&self, frame: &OutgoingFrame) -> Placed {
        if let Some(placed) = self.try_place_inline(&frame.header, frame.meta(), frame.payloads()) {
            return placed;
        }
        let mut tx = self.tx.producer.lock();
        if !tx.has_slot() {
            return Placed::NoSlot;
        }
        let len = frame.header.frame_len();
        if let Some(plan) = Self::split_plan(&tx, frame) {
            if !tx.has_slots(plan.parts.len() as u64) {
                return Placed::NoSlot;
            }
            let fresh = match plan.copied_bytes {
                0 => None,
                len if len > tx.capacity() => return Placed::NoSpace { too_large: true },
                len => match tx.reserve(len) {
                    Some(at) => Some(at),
                    None => return Placed::NoSpace { too_large: false },
                },
            };
            if let Some(at) = fresh {
                self.tx.note_placed(at, tx.capacity());
            }
            if !plan.head_in_span {
                // SAFETY: free slots' inline bytes are ours until published,
                // and the head with the payloads before the first part fits
                // them (`split_plan` checked).
                unsafe { write_frame(frame, tx.split_head_bytes(plan.parts.len()), plan.head_len as u64) };
            }
            let mut fresh_at = fresh.map_or(0, |at| at.position);
            let mut in_place = 0;
            let parts: SmallVec<[ring::SplitPart; 2]> = plan
                .parts
                .into_iter()
                .map(|part| match part {
                    PlannedPart::Held(held) => {
                        in_place += held.reservation().len;
                        ring::SplitPart::Held(held)
                    }
                    PlannedPart::Copied { payloads, len, with_head } => {
                        let at = ring::Reservation { position: fresh_at, len };
                        fresh_at += len;
                        let head = if with_head { plan.head_len as u64 } else { 0 };
                        // SAFETY: `at` lies inside the fresh reservation
                        // (the copied parts' lengths sum to its length),
                        // which is ours until published; `len` is the
                        // head's bytes (when it goes here) and then those
                        // payloads' padded bytes.
                        unsafe {
                            let dst = tx.bytes(at);
                            if with_head {
                                write_frame(frame, dst, head);
                            }
                            write_payloads(&frame.payloads()[payloads], dst.add(head as usize), len - head);
                        }
                        ring::SplitPart::Fresh(at)
                    }
                })
                .collect();
            let head = match plan.head_in_span {
                true => ring::HeadAt::FirstSpan(plan.head_len as u64),
                false => ring::HeadAt::Slot(plan.head_len),
            };
            if tx.split_parts_publishable(&parts) {
                let in_slot = if plan.head_in_span { 0 } else { plan.head_len as u64 };
                self.count_sent(&tx, in_place, in_slot + plan.copied_bytes);
                let published = tx.publish_split_parts(&parts, head);
                debug_assert!(published, "a split frame found publishable under the same lock");
                return self.published(tx);
            }
        }
        if len > tx.capacity() {
            return Placed::NoSpace { too_large: true };
        }
        let Some(at) = tx.reserve(len) else {
            return Placed::NoSpace { too_large: false };
        };
        self.tx.note_placed(at, tx.capacity());
        // SAFETY: the reservation is `len` bytes inside the peer's data
        // ring that the peer released and reads only after `publish`.
        unsafe { write_frame(frame, tx.bytes(at), len) };
        self.count_sent(&tx, 0, len);
        tx.publish(Some(at));
        self.published(tx)
    }

    /// Writes a frame that fits a slot straight into it, its head encoded
    /// there (no frame is built first), publishes it and rings the doorbell
    /// when the peer may sleep: `None` when the frame does not fit a slot,
    /// `Some(Placed::NoSlot)` when the peer has released no slot. The
    /// caller holds the connection's send lock.
    pub(crate) fn try_place_inline(&self, header: &FrameHeader, meta: &[u8], payloads: &[Tensor]) -> Option<Placed> {
        if line_len(header).is_some() {
            let parts =
                FrameParts { kind: header.kind, method: header.method, request_id: header.request_id, meta, payloads };
            debug_assert_eq!(header.flags, 0, "frames are sent without flags");
            return self.try_place_line(&parts);
        }
        let len = inline_len(header)?;
        // No payload of a frame this small is a span held in the ring (a
        // placed output is at least `PLACE_MIN_BYTES`): nothing to split.
        let mut tx = self.tx.producer.lock();
        if !tx.has_slot() {
            return Some(Placed::NoSlot);
        }
        // SAFETY: a free slot's inline bytes are ours until published; the
        // frame fits them (`inline_len`), and `header` was made for these
        // parts by the caller.
        unsafe { write_inline(tx.inline_bytes(), header, meta, payloads) };
        self.count_sent(&tx, 0, len as u64);
        tx.publish_inline(len);
        Some(self.published(tx))
    }

    /// Writes a frame of metadata alone that fits a slot's first line
    /// straight into it and publishes it (as `try_place_inline`): `None`
    /// when the frame is not one for a line, `Some(Placed::NoSlot)` when
    /// the peer has released no slot. No header is built: a line frame's
    /// lengths are within every limit (the caller checked the frame size
    /// against its own: `line_fits`). The caller holds the send lock.
    pub(crate) fn try_place_line(&self, parts: &FrameParts<'_>) -> Option<Placed> {
        if !parts.payloads.is_empty() || parts.meta.len() > LINE_META_BYTES {
            return None;
        }
        let meta = LineMeta::new(parts.meta)?;
        Some(self.try_place_line_meta(parts.kind, parts.method, parts.request_id, &meta))
    }

    /// As [`try_place_line`](Self::try_place_line), for a line frame of
    /// `meta` (a small call's answer).
    pub(crate) fn try_place_line_meta(&self, kind: FrameKind, method: u16, request_id: u64, meta: &LineMeta) -> Placed {
        let words = line::line_words(kind, method, request_id, meta);
        let len = LINE_HEAD_BYTES + meta.len();
        let mut tx = self.tx.producer.lock();
        if !tx.has_slot() {
            return Placed::NoSlot;
        }
        self.count_sent(&tx, 0, len as u64);
        tx.publish_line_words(words, len);
        self.published(tx)
    }

    /// A frame was published: wakes the peer if it may sleep.
    fn published(&self, tx: parking_lot::MutexGuard<'_, Producer>) -> Placed {
        if tx.consumer_may_sleep() {
            doorbell::ring(&tx.memory().doorbell().seq);
        }
        Placed::Sent
    }

    /// A frame goes through the ring: `in_place` bytes of it in spans its
    /// kernels wrote, `copied` bytes copied in. Counted before it is
    /// published, so that whoever reads the counters after it arrived (a
    /// peer that asks over another connection) finds it counted. Every
    /// frame adds to the channel's sent counts with plain stores, which
    /// `tx` (the producer lock, held) makes exclusive: a locked add between
    /// writing a slot and publishing it drains the store buffer while the
    /// reader spins on that line. Frames with tensors written in place
    /// (large ones) also pay the process-wide locked adds.
    fn count_sent(&self, tx: &Producer, in_place: u64, copied: u64) {
        let _exclusive = tx;
        self.stats.sent.add_exclusive(1, copied);
        if in_place > 0 {
            self.stats.frames_in_place.fetch_add(1, Ordering::Relaxed);
            self.stats.bytes_in_place.fetch_add(in_place, Ordering::Relaxed);
            crate::counters::count_shm_frame_in_place();
            crate::counters::count_shm_bytes_in_place(in_place);
        }
    }

    /// How `frame` crosses as a split frame when kernels wrote some of its
    /// payloads in this channel's ring (held spans, unpublished), or
    /// `None` when none did: the leading payloads that fit a slot with the
    /// head go there, each held payload after them is a span of its own,
    /// and each run of other payloads is copied into a span reserved for
    /// it. At most [`ring::MAX_FRAME_SPANS`] spans, and no more than the
    /// ring has slots: past that, the last held payloads are copied with
    /// the runs beside them until the frame fits.
    fn split_plan(tx: &Producer, frame: &OutgoingFrame) -> Option<SplitPlan> {
        let payloads = frame.payloads();
        // Most frames: nothing in this ring, seen by address alone.
        if !payloads.iter().any(|payload| Self::ring_offset(tx, payload).is_some()) {
            return None;
        }
        let mut helds: SmallVec<[Option<Arc<ring::HeldSpan>>; 2]> =
            payloads.iter().map(|payload| Self::held_for(tx, payload)).collect();
        // A frame needs all its slots free at once: never more than the ring has.
        let max_parts = ring::MAX_FRAME_SPANS.min(usize::try_from(tx.memory().slots).unwrap_or(usize::MAX));
        loop {
            if helds.iter().all(Option::is_none) {
                return None;
            }
            let plan = Self::plan_parts(frame, &helds)?;
            if plan.parts.len() <= max_parts {
                return Some(plan);
            }
            let last_held = helds.iter().rposition(Option::is_some)?;
            helds[last_held] = None;
        }
    }

    /// [`split_plan`](Self::split_plan)'s parts with `helds[i]` the span
    /// payload `i` lies over exactly, if any. A head too long for a slot
    /// (many payloads, long names) starts the first part instead, with up
    /// to [`SPANNED_HEAD_PAYLOAD_BYTES`] of leading payloads (the reader
    /// copies a head out, so these may be of any dtype).
    fn plan_parts(frame: &OutgoingFrame, helds: &[Option<Arc<ring::HeldSpan>>]) -> Option<SplitPlan> {
        let payloads = frame.payloads();
        let padded = |payload: &Tensor| crate::net::frame::padded_payload_len(payload.byte_len() as u64);
        let mut head_len = frame.head().len();
        let head_in_span = head_len > ring::INLINE_BYTES;
        let head_max = if head_in_span { head_len + SPANNED_HEAD_PAYLOAD_BYTES } else { ring::INLINE_BYTES };
        let mut in_head = 0;
        while in_head < payloads.len() && helds[in_head].is_none() {
            let with_next = head_len + usize::try_from(padded(&payloads[in_head])?).ok()?;
            if with_next > head_max {
                break;
            }
            head_len = with_next;
            in_head += 1;
        }
        if head_in_span && (head_len as u64 % ring::SPAN_ALIGN != 0 || head_len as u64 > ring::MAX_SPANNED_HEAD) {
            return None;
        }
        // The head's bytes while they still wait for the part they start.
        let mut head_waiting = if head_in_span { head_len as u64 } else { 0 };
        let mut parts = SmallVec::new();
        let mut copied_bytes = 0u64;
        let mut at = in_head;
        while at < payloads.len() {
            if let Some(held) = &helds[at] {
                if head_waiting > 0 {
                    parts.push(PlannedPart::Copied { payloads: at..at, len: head_waiting, with_head: true });
                    copied_bytes += head_waiting;
                    head_waiting = 0;
                }
                parts.push(PlannedPart::Held(held.clone()));
                at += 1;
                continue;
            }
            let run = at..(at..payloads.len()).find(|&i| helds[i].is_some()).unwrap_or(payloads.len());
            let with_head = head_waiting > 0;
            let mut len = std::mem::take(&mut head_waiting);
            for payload in &payloads[run.clone()] {
                len = len.checked_add(padded(payload)?)?;
            }
            at = run.end;
            // Empty payloads need no bytes: they lie at any part's end.
            if len > 0 {
                copied_bytes += len;
                parts.push(PlannedPart::Copied { payloads: run, len, with_head });
            }
        }
        Some(SplitPlan { head_len, head_in_span, parts, copied_bytes })
    }

    /// Where `payload`'s bytes start in this channel's data ring, if they do.
    fn ring_offset(tx: &Producer, payload: &Tensor) -> Option<u64> {
        let offset = (payload.as_bytes().as_ptr() as u64).checked_sub(tx.memory().data as u64)?;
        (offset < tx.capacity()).then_some(offset)
    }

    /// The held, unpublished span `payload` lies over exactly, if any.
    fn held_for(tx: &Producer, payload: &Tensor) -> Option<Arc<ring::HeldSpan>> {
        let offset = Self::ring_offset(tx, payload)?;
        tx.held_at(offset, crate::net::frame::padded_payload_len(payload.byte_len() as u64)?)
    }

    /// Publishes "the next frame is on the socket". The caller checked
    /// that a slot is free (`Placed::NoSpace`) and still holds the send lock.
    pub(crate) fn publish_via_socket(&self) {
        let mut tx = self.tx.producer.lock();
        tx.publish(None);
        if tx.consumer_may_sleep() {
            doorbell::ring(&tx.memory().doorbell().seq);
        }
        drop(tx);
        self.stats.socket_frames.fetch_add(1, Ordering::Relaxed);
        crate::counters::count_shm_socket_frame();
    }

    /// Wakes this side's reader (the connection is closing).
    pub(crate) fn wake_reader(&self) {
        doorbell::ring(&self.region.ring(self.rx_direction).doorbell().seq);
    }

    /// The next frame in the ring, if one was published. A frame whose
    /// spans would leave the lent ones past what the producer can see or
    /// place around is copied out of the ring and its spans released at
    /// once (see `Consumer::should_copy_out`).
    pub(crate) fn poll(&self, rx: &mut RxState) -> Result<Polled, ShmError> {
        // SAFETY: `poll` hands over `len` bytes inside the slot, readable
        // until it returns.
        let RxState { consumer, inline_buf, .. } = rx;
        let polled = consumer.poll(|at, len, form| unsafe {
            match form {
                InlineForm::Slot => self.decode_inline(at, len, inline_buf),
                InlineForm::Line => self.decode_line(at, len, inline_buf),
            }
        })?;
        let lend = match &polled {
            Some(Received::Frame { .. }) => !rx.consumer.should_copy_out(1),
            Some(Received::Split { spans, .. }) => !rx.consumer.should_copy_out(spans.len()),
            _ => true,
        };
        match polled {
            None => Ok(Polled::Empty),
            Some(Received::ViaSocket) => Ok(Polled::ViaSocket),
            Some(Received::Inline(frame)) => Ok(Polled::Frame(frame?)),
            Some(Received::Frame { offset, len, span }) => {
                let base = rx.consumer.bytes(offset);
                let keep: Arc<dyn Send + Sync> = self.region.clone();
                Ok(Polled::Frame(self.decode(base, len, span.keeping(keep), lend)?))
            }
            Some(Received::Split { head, spans }) => {
                let parts = spans
                    .into_iter()
                    .map(|s| {
                        let keep: Arc<dyn Send + Sync> = self.region.clone();
                        SpanPart { ptr: rx.consumer.bytes(s.offset), len: s.len, span: s.span.keeping(keep) }
                    })
                    .collect();
                Ok(Polled::Frame(self.decode_split(head.bytes(), parts, lend)?))
            }
        }
    }

    /// The next frame if it is a line frame (`Consumer::take_line`), else
    /// `None`: the common case of a call's request or response, copied
    /// onto the caller's stack and checked, without the general poll's
    /// descriptor and enums or a buffer of its own.
    pub(crate) fn poll_line(&self, rx: &mut RxState) -> Result<Option<LineFrame>, ShmError> {
        let Some((words, len)) = rx.consumer.take_line()? else {
            return Ok(None);
        };
        Ok(Some(LineFrame::decode(&words, len, &self.limits)?))
    }

    /// `line` as a [`ReceivedFrame`], for a reader that wants frames: its
    /// metadata copied into the reader's reused inline buffer.
    pub(crate) fn frame_of_line(&self, rx: &mut RxState, line: LineFrame) -> Result<ReceivedFrame, FrameError> {
        Ok(line.into_received(rx.inline_buf.take()?))
    }

    /// The header of the `len`-byte frame at `at`, copied out and checked.
    ///
    /// # Safety
    /// `len` >= 64 readable bytes at `at`.
    unsafe fn header_at(&self, at: *const u8, len: usize) -> Result<FrameHeader, FrameError> {
        if len < HEADER_BYTES {
            return Err(FrameError::InconsistentLengths(format!("a {len}-byte frame in the ring")));
        }
        let mut header_bytes = [0u8; HEADER_BYTES];
        // SAFETY: the caller's promise, and `len` >= HEADER_BYTES.
        unsafe { std::ptr::copy_nonoverlapping(at, header_bytes.as_mut_ptr(), HEADER_BYTES) };
        let header = FrameHeader::decode(&header_bytes, &self.limits)?;
        if header.frame_len() != len as u64 {
            return Err(FrameError::InconsistentLengths(format!(
                "a {}-byte frame in a {len}-byte ring span",
                header.frame_len()
            )));
        }
        Ok(header)
    }

    /// A slot's inline frame (its compact head, then its body), the body
    /// copied into `buf`'s buffer.
    ///
    /// # Safety
    /// `len` readable bytes at `at`, at most [`ring::INLINE_BYTES`].
    unsafe fn decode_inline(
        &self,
        at: *const u8,
        len: usize,
        buf: &mut InlineBuf,
    ) -> Result<ReceivedFrame, FrameError> {
        if len < INLINE_HEAD_BYTES {
            return Err(FrameError::InconsistentLengths(format!("an inline frame of {len} bytes")));
        }
        let mut head = [0u8; INLINE_HEAD_BYTES];
        // SAFETY: the caller's promise, and `len` >= INLINE_HEAD_BYTES.
        // Copied before it is checked: the peer can still write the slot.
        unsafe { std::ptr::copy_nonoverlapping(at, head.as_mut_ptr(), INLINE_HEAD_BYTES) };
        let body_len = len - INLINE_HEAD_BYTES;
        let header = decode_inline_head(&head, body_len as u64, &self.limits)?;
        assert!(body_len <= InlineBuf::BYTES, "an inline frame's body fits the inline buffer");
        let body = buf.take()?;
        // SAFETY: the body is the rest of the caller's `len` bytes and fits
        // the buffer, which nobody else holds (`take`), so no frame or
        // tensor reads what is overwritten.
        unsafe { std::ptr::copy_nonoverlapping(at.add(INLINE_HEAD_BYTES), body.as_mut_ptr(), body_len) };
        ReceivedFrame::parse(header, body, 0)
    }

    /// A slot's line frame (its line head, then its metadata), the
    /// metadata copied into `buf`'s buffer.
    ///
    /// # Safety
    /// [`ring::LINE_BYTES`] readable bytes at `at` (the line), of which the
    /// frame claims `len`.
    unsafe fn decode_line(&self, at: *const u8, len: usize, buf: &mut InlineBuf) -> Result<ReceivedFrame, FrameError> {
        let mut words = [0u64; ring::LINE_WORDS];
        // SAFETY: the caller's promise; the line's bytes follow the kind
        // word's 4 in `words`. Copied before anything is checked: the peer
        // can still write the slot.
        unsafe { std::ptr::copy_nonoverlapping(at, words.as_mut_ptr().cast::<u8>().add(4), ring::LINE_BYTES) };
        let frame = LineFrame::decode(&words, len, &self.limits)?;
        Ok(frame.into_received(buf.take()?))
    }

    /// The frame at `at`, whose `header` was checked, copied whole.
    ///
    /// # Safety
    /// `header.frame_len()` readable bytes at `at`.
    unsafe fn copy_whole(at: *const u8, header: FrameHeader) -> Result<ReceivedFrame, FrameError> {
        let body_len = header.body_len as usize;
        let body = IoBuf::for_receive(body_len).map_err(|e| FrameError::Alloc(body_len as u64, e.to_string()))?;
        // SAFETY: the body lies inside the frame (frame_len == len); the
        // destination is our fresh buffer of `body_len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(at.add(HEADER_BYTES), body.as_mut_ptr(), body_len) };
        ReceivedFrame::parse(header, Arc::new(body), 0)
    }

    /// Turns a span of the ring into a frame. The header, metadata and
    /// payload table are copied out before they are checked (the peer can
    /// still write the ring: what was checked must not change); float
    /// payloads of large frames stay in place, lent to their tensors,
    /// when `lend`.
    fn decode(&self, base: *mut u8, len: usize, span: ring::LentSpan, lend: bool) -> Result<ReceivedFrame, FrameError> {
        // SAFETY: `len` bytes at `base` lie inside the data ring (the
        // consumer checked the span) and stay mapped while `span` lives.
        let header = unsafe { self.header_at(base, len)? };
        if !lend || len as u64 <= SMALL_FRAME_COPY_BYTES || header.payload_bytes == 0 {
            if !lend {
                self.count_copied_out(header.payload_bytes);
            }
            // SAFETY: as above; `header_at` checked that `len` is its length.
            let frame = unsafe { Self::copy_whole(base, header) };
            drop(span);
            return frame;
        }
        let head_len = header.layout().payload_offset as usize;
        let body = IoBuf::for_receive(head_len).map_err(|e| FrameError::Alloc(head_len as u64, e.to_string()))?;
        // SAFETY: the head lies inside the span (frame_len == len); the
        // destination is our fresh buffer of `head_len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(base.add(HEADER_BYTES), body.as_mut_ptr(), head_len) };
        let ptr = base.wrapping_add(HEADER_BYTES + head_len);
        let len = header.payload_bytes as usize;
        Self::with_payloads(header, Arc::new(body), 0, smallvec::smallvec![SpanPart { ptr, len, span }], true)
    }

    /// A received frame's payload bytes were copied out of the ring rather
    /// than lent.
    fn count_copied_out(&self, bytes: u64) {
        self.stats.bytes_copied_out.fetch_add(bytes, Ordering::Relaxed);
        crate::counters::count_shm_copied_out(bytes);
    }

    /// A split frame: its head (copied out of the slot) and the spans
    /// kernels on the other side wrote its other payloads into, in order.
    fn decode_split(&self, head: &[u8], parts: SpanParts, lend: bool) -> Result<ReceivedFrame, FrameError> {
        let header_bytes: &[u8; HEADER_BYTES] = head
            .get(..HEADER_BYTES)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| FrameError::InconsistentLengths(format!("a {}-byte split frame head", head.len())))?;
        let header = FrameHeader::decode(header_bytes, &self.limits)?;
        // The head holds the metadata, the table and the payloads before
        // the ones in the spans (the sender's `split_plan`).
        let body_len = head.len() - HEADER_BYTES;
        let in_head = body_len.checked_sub(header.layout().payload_offset as usize);
        let in_spans: u64 = parts.iter().map(|p| p.len as u64).sum();
        if in_head.and_then(|n| header.payload_bytes.checked_sub(n as u64)) != Some(in_spans) {
            return Err(FrameError::InconsistentLengths(format!(
                "a split frame of {} head and {} payload bytes in a {}-byte head and spans of {:?} bytes",
                HEADER_BYTES as u64 + header.layout().payload_offset,
                header.payload_bytes,
                head.len(),
                parts.iter().map(|p| p.len).collect::<Vec<_>>()
            )));
        }
        let in_head = in_head.unwrap_or(0);
        let body = IoBuf::for_receive(body_len).map_err(|e| FrameError::Alloc(body_len as u64, e.to_string()))?;
        // SAFETY: the `body_len` bytes after the header in our copy of the
        // head, into our fresh buffer of that size.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr().add(HEADER_BYTES), body.as_mut_ptr(), body_len) };
        if !lend {
            self.count_copied_out(in_spans);
        }
        Self::with_payloads(header, Arc::new(body), in_head, parts, lend)
    }

    /// The frame whose checked `header` and copied `body` (metadata and
    /// table, then `in_head` payload bytes) were read, over the rest of
    /// its payload bytes in `parts` (ring spans, in order): float payloads
    /// stay there, lent to their tensors, when `lend`; anything else is
    /// copied.
    fn with_payloads(
        header: FrameHeader,
        body: Arc<IoBuf>,
        in_head: usize,
        parts: SpanParts,
        lend: bool,
    ) -> Result<ReceivedFrame, FrameError> {
        let layout = header.layout();
        if body.len() < (layout.table_offset + header.table_len) as usize {
            return Err(FrameError::Truncated { need: header.body_len, have: body.len() as u64 });
        }
        // SAFETY: the table lies inside our private copy (checked just
        // above; `parse_parts` checks it again before use); nothing writes
        // the copy.
        let table = unsafe { body.slice(layout.table_offset as usize, header.table_len as usize) };
        let payloads: PayloadParts = if lend && payloads_may_stay_in_the_ring(table, header.payload_count, in_head) {
            parts
                .into_iter()
                .map(|part| {
                    let ptr = NonNull::new(part.ptr).expect("inside a mapping");
                    // SAFETY: the part's bytes lie inside its span (the
                    // consumer checked it), 64-byte aligned (spans are),
                    // and stay mapped and unwritten by us until `span`
                    // drops with this buffer; the producer does not reuse
                    // them before the span is released.
                    let buf = unsafe { IoBuf::lent(ptr, part.len, Box::new(part.span)) };
                    PayloadPart { buf: Arc::new(buf), base: 0, len: part.len }
                })
                .collect()
        } else {
            // Bytes whose validity was checked (string offsets, bools of 0
            // or 1) or that kernels check then use (integer indices): read
            // in place, a peer could change them in between. Copied, every
            // part into one buffer.
            let len: usize = parts.iter().map(|p| p.len).sum();
            let copy = IoBuf::for_receive(len).map_err(|e| FrameError::Alloc(len as u64, e.to_string()))?;
            let mut at = 0;
            for part in parts {
                // SAFETY: source inside the span, destination inside our
                // fresh buffer (the parts' lengths sum to its size).
                unsafe { std::ptr::copy_nonoverlapping(part.ptr, copy.as_mut_ptr().add(at), part.len) };
                at += part.len;
            }
            smallvec::smallvec![PayloadPart { buf: Arc::new(copy), base: 0, len }]
        };
        ReceivedFrame::parse_parts(header, body, 0, in_head, payloads)
    }

    pub fn region(&self) -> &SharedRegion {
        &self.region
    }
}

/// A split frame as [`ShmChannel::split_plan`] lays it out.
/// Leading payload bytes a head too long for a slot takes along into its
/// span (small ones: a step counter, a loss).
const SPANNED_HEAD_PAYLOAD_BYTES: usize = 4 << 10;

struct SplitPlan {
    /// The frame's head and the payloads before the first part, padded.
    head_len: usize,
    /// The head is too long for a slot: it starts the first part, which
    /// is copied.
    head_in_span: bool,
    parts: SmallVec<[PlannedPart; 2]>,
    /// The copied parts' bytes (the head's, when it starts one), reserved
    /// together.
    copied_bytes: u64,
}

enum PlannedPart {
    /// A payload a kernel wrote in this span.
    Held(Arc<ring::HeldSpan>),
    /// These payloads, `len` bytes padded, copied into a fresh span (after
    /// the frame's head, `with_head`).
    Copied { payloads: std::ops::Range<usize>, len: u64, with_head: bool },
}

/// A received frame's payload bytes in the ring: `len` bytes at `ptr`,
/// lent until `span` drops.
struct SpanPart {
    ptr: *mut u8,
    len: usize,
    span: ring::LentSpan,
}

type SpanParts = smallvec::SmallVec<[SpanPart; 1]>;

/// This side's sending end: the producer, and what the channel watch needs
/// to trim the ring once the channel idles (`watch::Trim`).
struct TxSide {
    producer: Mutex<Producer>,
    region: Arc<SharedRegion>,
    direction: Direction,
    trim_after: Duration,
    /// When the last frame reaching past `TRIM_KEEP_BYTES` was placed, in
    /// nanoseconds on `clock_base()`.
    last_large_ns: AtomicU64,
    /// A trim is pending in the watch.
    trim_scheduled: AtomicBool,
}

fn clock_base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

impl TxSide {
    /// A span was reserved at `at`: one reaching past the kept prefix
    /// (re)starts the idle clock and asks for a trim. The caller holds the
    /// producer's lock.
    fn note_placed(self: &Arc<Self>, at: ring::Reservation, capacity: u64) {
        if at.position % capacity + at.len <= TRIM_KEEP_BYTES || self.trim_after.is_zero() {
            return;
        }
        let now = u64::try_from(clock_base().elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_large_ns.store(now, Ordering::Relaxed);
        if !self.trim_scheduled.swap(true, Ordering::AcqRel) {
            let me: Arc<dyn watch::Trim> = self.clone();
            watch::schedule_trim(Arc::downgrade(&me));
        }
    }

    /// Returns the free pages past the kept prefix to the kernel; the
    /// bytes punched.
    fn punch_free_pages(&self) -> u64 {
        let producer = self.producer.lock();
        producer
            .free_ranges()
            .iter()
            .map(|&(start, end)| self.region.punch(self.direction, start.max(TRIM_KEEP_BYTES), end))
            .sum()
    }
}

impl watch::Trim for TxSide {
    fn due(&self) -> Instant {
        let last = self.last_large_ns.load(Ordering::Relaxed);
        clock_base() + Duration::from_nanos(last) + self.trim_after
    }

    fn trim(&self, now: Instant) -> bool {
        if self.due() > now {
            return false;
        }
        // Cleared first: a large frame placed from here on asks again.
        self.trim_scheduled.store(false, Ordering::Release);
        let punched = self.punch_free_pages();
        tracing::debug!("shared-memory ring idle: {punched} bytes of free pages returned");
        // A large frame placed while this ran, before the flag was clear,
        // asked for nothing: keep this request for it.
        self.due() <= now || self.trim_scheduled.swap(true, Ordering::AcqRel)
    }
}

/// Places a kernel's output in the peer's ring: a span held ahead of the
/// frame that sends it (`ring::Producer::reserve_held`).
struct RingPlacement {
    tx: Arc<TxSide>,
}

/// Keeps a held span's region mapped while a tensor lies over it, and
/// tells the producer when that tensor is gone.
struct HeldBytes {
    held: Arc<ring::HeldSpan>,
    _region: Arc<SharedRegion>,
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.held.done_here();
    }
}

impl OutputPlacement for RingPlacement {
    fn place(&self, len: usize) -> Option<PlacedBytes> {
        let padded = crate::net::frame::padded_payload_len(len as u64)?;
        let mut producer = self.tx.producer.lock();
        if padded > producer.capacity() / 2 {
            // A tensor that large would hold most of the ring until it is
            // sent; it goes to the heap and is copied as before.
            return None;
        }
        let held = producer.reserve_held(padded)?;
        let at = held.reservation();
        self.tx.note_placed(at, producer.capacity());
        let ptr = NonNull::new(producer.bytes(at))?;
        drop(producer);
        Some(PlacedBytes { ptr, keep: Arc::new(HeldBytes { held, _region: self.tx.region.clone() }) })
    }
}
