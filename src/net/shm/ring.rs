//! The index protocol of one direction of a shared-memory channel: a ring
//! of slots, each with its own publish word, that carry small frames inline
//! and describe larger ones in a separate data ring of frame bytes.
//!
//! Owns: who may write which slot, index and byte, and the checks that keep
//! a hostile producer from making the consumer read outside the ring. Must
//! not know what a frame is (the channel above decodes the bytes), how to
//! sleep (the doorbell), or where the memory comes from (the region): it
//! works on raw pointers it is given, so the same code runs over a heap
//! block under Miri.
//!
//! Ownership, per direction:
//! - The producer alone writes slot `i` (descriptor, inline bytes, then its
//!   `seq` word with `Release`: `seq == i + 1` publishes it) while the
//!   consumer has released it (`i < desc_head + slots`), and data bytes in
//!   `[data_tail, data_head + capacity)`. There is no shared tail index: a
//!   consumer learns of a frame from the slot it reads next, so a small
//!   frame costs it one cache-line transfer (publish word, descriptor and
//!   the frame's first bytes share the slot's first line) instead of three
//!   (tail, descriptor, data).
//! - The consumer alone writes `desc_head` (a slot is free again once the
//!   consumer has copied it out, inline bytes included, before the frame is
//!   even decoded) and `data_head` (data is free again only when every span
//!   before it has been released: a received tensor borrows its span until
//!   it drops).
//! - Spans are released out of order (tensors drop in any order); the
//!   consumer advances `data_head` over the released prefix only, so bytes
//!   that a live tensor reads are never handed back to the producer.
//!
//! Positions are monotonic `u64` byte counts; `position % capacity` is the
//! offset in the data ring. A span never wraps: when the rest of the lap is
//! too short the producer starts the span at the next lap (and, whenever the
//! ring is empty and the span fits before its current offset, it does so as
//! well, so a quiet connection keeps reusing the first pages of the ring).
//!
//! Trust: a slot's descriptor (and inline bytes) are copied out of shared
//! memory before they are checked, and a span is handed out only when it
//! lies wholly inside the data ring, starts less than a lap behind the
//! furthest end taken and less than two laps past it, and does not
//! overlap a span still lent. A publish word other than the expected one
//! reads as "nothing yet". A producer that breaks a rule is a protocol
//! error; it can never make the consumer read outside the ring.

use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};

/// Bytes every span's start and length are multiples of (frames are).
pub const SPAN_ALIGN: u64 = 64;

/// How far past the furthest end taken a span may start, in laps: a lap
/// to skip bytes lent, one more for spans held on the producer's side when
/// the consumer had released everything.
const AHEAD_LAPS: u64 = 2;

/// Spans at least this large read the consumer's head before placing.
const FRESH_HEAD_MIN_BYTES: u64 = 64 << 10;

/// What a descriptor announces.
pub const DESC_FRAME: u32 = 1;
/// "The next frame comes over the socket": sent when a frame does not fit
/// the data ring, so that frames stay in order across both paths.
pub const DESC_VIA_SOCKET: u32 = 2;
/// The frame's `len` bytes are in the slot itself.
pub const DESC_INLINE: u32 = 3;
/// A frame in two parts: its head (`reserved2` bytes) in the slot, its
/// payload in the span at `position` (`len` bytes). The span was reserved
/// before earlier-published frames, so it may lie behind them: a kernel
/// wrote its output there while they went out.
pub const DESC_SPLIT: u32 = 4;
/// One span of the next split frame's payloads, ahead of the span its
/// [`DESC_SPLIT`] slot names: a frame with several payloads written in
/// place takes one slot per span, each span checked as any other. At most
/// [`MAX_FRAME_SPANS`] - 1 in a row, and nothing but more of them or the
/// split frame may follow one.
pub const DESC_SPAN: u32 = 5;
/// As [`DESC_SPLIT`], for a head too long for a slot: the head
/// (`reserved2` bytes, a multiple of 64) is the start of the frame's first
/// span, and the slot holds nothing else.
pub const DESC_SPLIT_SPANNED_HEAD: u32 = 6;
/// The frame's bytes are the rest of the slot's first cache line, after
/// the kind word (from byte 12 of the slot): the kind word's low byte is
/// this value and its upper 24 bits count the bytes (1 to [`LINE_BYTES`]).
/// A small frame then crosses in the one line the consumer spins on, as a
/// raw ping-pong's message does, instead of that line and the next.
pub const DESC_LINE: u32 = 7;

/// Bytes of a frame a slot's first line can carry ([`DESC_LINE`]).
pub const LINE_BYTES: usize = 64 - 8 - 4;

/// Offset in a slot of a line frame's bytes: past the publish word and
/// the kind word.
const LINE_OFFSET: usize = 12;

/// A slot's first line past its publish word, as the words it is read and
/// written in: the kind word (its first 4 bytes in memory order), then a
/// line frame's [`LINE_BYTES`]. Seven loads or stores of a word each,
/// where a volatile byte array took 52 of each, and bytes stored one at a
/// time are then read back wide through failed store forwarding.
pub type LineWords = [u64; LINE_WORDS];

/// Words of [`LineWords`].
pub const LINE_WORDS: usize = (4 + LINE_BYTES) / 8;

const _: () = assert!(LINE_WORDS * 8 == 4 + LINE_BYTES && LINE_OFFSET == 12);

/// The line frame's bytes of `words`, in memory order.
pub fn line_bytes_of(words: &LineWords) -> [u8; LINE_BYTES] {
    let mut bytes = [0u8; LINE_BYTES];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = words[(i + 4) / 8].to_ne_bytes()[(i + 4) % 8];
    }
    bytes
}

/// The longest head a split frame may carry in its first span (the
/// consumer copies it out before anything reads it).
pub const MAX_SPANNED_HEAD: u64 = 1 << 20;

/// Spans one split frame's payloads may lie in.
pub const MAX_FRAME_SPANS: usize = 16;

/// The most room a held span leaves other frames when it goes back to the
/// ring's first pages ([`Producer::reserve_held`]).
const HELD_ROOM_AFTER_MAX: u64 = 1 << 20;

/// The consumer's wait note, on a line of its own: the CPU (plus one) the
/// consumer spins on in the wait it is in, 0 when it is in no noted wait.
/// Written by the consumer, read by the producer's own reader to learn
/// that the two spin on one core. Not in the doorbell line: the producer
/// reads that one at every publish, and a note stored there cost it a
/// line transfer each time.
#[repr(C, align(64))]
pub struct WaitNoteLine {
    pub waiting_cpu: AtomicU32,
}

/// The consumer's cache line.
#[repr(C, align(64))]
pub struct ConsumerLine {
    pub desc_head: AtomicU64,
    pub data_head: AtomicU64,
}

/// The doorbell: `seq` is the futex word, bumped by the producer when the
/// consumer said it may sleep.
#[repr(C, align(64))]
pub struct DoorbellLine {
    pub seq: AtomicU32,
    pub sleeping: AtomicU32,
}

/// The share of the data ring (numerator, denominator) past which a
/// consumer that already lends other spans copies a frame out instead of
/// lending it (see [`Consumer::should_copy_out`]).
pub const LENT_BYTES_SHARE: (u64, u64) = (3, 4);

/// Ranges of lent bytes the consumer publishes beyond its head (each one
/// or more lent spans that touch), and the most it lends at once: the
/// channel copies a frame out of the ring on arrival rather than lend a
/// range past them (see [`Consumer::should_copy_out`]), so the producer
/// always knows every lent byte and can place frames between them,
/// however long a reader keeps what it received.
pub const HOLDS: usize = 48;

/// The consumer's view of what it still holds, for a producer whose head
/// rule finds no room: up to [`HOLDS`] ranges of live spans (oldest
/// first; spans that touch share a range) and `live_from`, from where on
/// every position may be live. Bytes below `live_from` outside the listed
/// ranges are released, so the producer may place frames between them
/// while old spans stay lent. Written under a sequence lock (`version` odd
/// while the consumer writes).
#[repr(C, align(64))]
pub struct HoldsLine {
    pub version: AtomicU64,
    pub count: AtomicU64,
    pub live_from: AtomicU64,
    /// `start, end` pairs.
    pub spans: [AtomicU64; 2 * HOLDS],
}

/// One direction's indices, each party's on its own cache line.
#[repr(C)]
pub struct RingControl {
    pub wait_note: WaitNoteLine,
    pub consumer: ConsumerLine,
    pub doorbell: DoorbellLine,
    pub holds: HoldsLine,
}

const _: () = assert!(std::mem::size_of::<RingControl>() == 1024);

/// What a slot says, as laid out in shared memory after its publish word.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Descriptor {
    pub kind: u32,
    pub reserved: u32,
    pub position: u64,
    pub len: u64,
    pub reserved2: u64,
}

/// Bytes of a frame a slot can carry itself.
pub const INLINE_BYTES: usize = 472;

/// One slot: publish word, descriptor, inline frame bytes.
#[repr(C, align(64))]
pub struct Slot {
    /// `index + 1` once slot `index` (this one, on that lap) is published.
    pub seq: AtomicU64,
    pub descriptor: Descriptor,
    pub inline: [u8; INLINE_BYTES],
}

pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();
const _: () = assert!(SLOT_BYTES == 512);

/// Where one direction lives. The memory must stay mapped while any
/// producer, consumer or lent span refers to it (the region's `Arc`).
#[derive(Clone, Copy, Debug)]
pub struct RingMemory {
    pub control: *const RingControl,
    pub slots_base: *mut Slot,
    /// A power of two.
    pub slots: u64,
    pub data: *mut u8,
    /// A multiple of [`SPAN_ALIGN`].
    pub capacity: u64,
}

// SAFETY: plain addresses of shared memory; every access goes through the
// protocol above (atomics for indices and publish words, disjoint byte
// ranges for data).
unsafe impl Send for RingMemory {}
// SAFETY: as above.
unsafe impl Sync for RingMemory {}

impl RingMemory {
    fn control(&self) -> &RingControl {
        // SAFETY: `control` points at a live, aligned `RingControl` for as
        // long as this memory is mapped (the constructor's contract), and
        // it is only accessed through atomics.
        unsafe { &*self.control }
    }

    pub fn doorbell(&self) -> &DoorbellLine {
        &self.control().doorbell
    }

    /// The consumer's wait note ([`WaitNoteLine`]).
    pub fn wait_note(&self) -> &AtomicU32 {
        &self.control().wait_note.waiting_cpu
    }

    /// The slot of `index`.
    fn slot(&self, index: u64) -> *mut Slot {
        // The masked index is below `slots`: inside the slot array.
        self.slots_base.wrapping_add((index & (self.slots - 1)) as usize)
    }

    /// The publish word of `index`'s slot.
    fn seq(&self, index: u64) -> &AtomicU64 {
        // SAFETY: the slot lies in the mapping (masked index); only the
        // `seq` field is borrowed, and it is only accessed atomically.
        unsafe { &*std::ptr::addr_of!((*self.slot(index)).seq) }
    }
}

/// Why a consumer refused what a producer published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("slot {index} has unknown kind {kind}")]
    UnknownKind { index: u64, kind: u32 },
    #[error("slot {index}: an inline frame of {len} bytes (a slot holds 1 to {INLINE_BYTES})")]
    InlineLength { index: u64, len: u64 },
    #[error("slot {index}: a line frame of {len} bytes (a slot's first line holds 1 to {LINE_BYTES})")]
    LineLength { index: u64, len: u64 },
    #[error("slot {index}: a split frame's head of {len} bytes (a slot holds 64 to {INLINE_BYTES})")]
    SplitHeadLength { index: u64, len: u64 },
    #[error(
        "slot {index}: a split frame's head of {len} bytes in a first span of {span} (64 to {MAX_SPANNED_HEAD}, a multiple of 64, within the span)"
    )]
    SpannedHeadLength { index: u64, len: u64, span: u64 },
    #[error("slot {index}: span {position}+{len} is not 64-byte aligned or is empty")]
    Misaligned { index: u64, position: u64, len: u64 },
    #[error("slot {index}: span {position}+{len} does not lie inside the {capacity}-byte data ring")]
    OutsideRing { index: u64, position: u64, len: u64, capacity: u64 },
    #[error(
        "slot {index}: span at {position} is a lap or more behind, or two or more ahead of, the furthest end taken ({expected})"
    )]
    OutOfSequence { index: u64, position: u64, expected: u64 },
    #[error("slot {index}: span {position}+{len} overlaps the span lent at {lent}")]
    Overlap { index: u64, position: u64, len: u64, lent: u64 },
    #[error("slot {index}: more than {MAX_FRAME_SPANS} spans for one split frame")]
    TooManySpans { index: u64 },
    #[error("slot {index}: a frame of kind {kind} after spans announced for a split frame")]
    SpanWithoutSplit { index: u64, kind: u32 },
}

/// Which of a slot's two inline forms a frame took: the slot's bytes past
/// the descriptor ([`DESC_INLINE`]) or the rest of its first line
/// ([`DESC_LINE`]). The channel encodes their heads differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InlineForm {
    Slot,
    Line,
}

/// What the consumer took from the ring.
#[derive(Debug)]
pub enum Received<T> {
    /// `len` bytes at `offset` in the data ring, lent until `span` drops.
    Frame { offset: usize, len: usize, span: LentSpan },
    /// What the caller's copy of an inline frame returned; the slot is free
    /// again.
    Inline(T),
    /// The next frame is on the socket.
    ViaSocket,
    /// A frame whose head was in the slot or at the start of its first
    /// span (copied out here) and whose other payloads are in `spans`, in
    /// order, each lent until it drops.
    Split { head: SplitHead, spans: Vec<SplitSpan> },
}

/// One span of a split frame's payloads: `len` bytes at `offset` in the
/// data ring, lent until `span` drops.
#[derive(Debug)]
pub struct SplitSpan {
    pub offset: usize,
    pub len: usize,
    pub span: LentSpan,
}

/// A split frame's head, copied out of its slot or first span.
pub struct SplitHead {
    bytes: Vec<u8>,
}

impl SplitHead {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for SplitHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SplitHead({} bytes)", self.bytes.len())
    }
}

/// Where a split frame's head is, for [`Producer::publish_split_parts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadAt {
    /// These many bytes written at [`Producer::split_head_bytes`].
    Slot(usize),
    /// The first these many bytes of the first part, a fresh one.
    FirstSpan(u64),
}

/// Where one span of a split frame lies: a span held for a kernel's
/// output, or (part of) a reservation made for this frame, its bytes
/// copied in by the sender.
#[derive(Debug, Clone)]
pub enum SplitPart {
    Held(Arc<HeldSpan>),
    Fresh(Reservation),
}

/// Spans reserved ahead of their frame that one producer keeps at most.
pub const MAX_HELD: usize = 16;

/// A span the producer reserved before the frame that sends it exists: a
/// kernel writes its output there, and a split frame
/// ([`Producer::publish_split_parts`]) later hands it to the consumer without a
/// copy. Until then, and for as long as this side still reads it, the
/// producer places nothing over it.
#[derive(Debug)]
pub struct HeldSpan {
    at: Reservation,
    /// The producer's tail before it was reserved: where the tail goes
    /// back to if it is dropped unpublished with nothing reserved after it.
    tail_before: u64,
    /// This side neither writes nor reads the bytes any more (the tensor
    /// over them dropped).
    done_here: AtomicBool,
    /// The slot index it was published in (`UNPUBLISHED` before): once the
    /// consumer is past that slot, its head and holds account for it.
    published_in: AtomicU64,
}

const UNPUBLISHED: u64 = u64::MAX;

impl HeldSpan {
    pub fn reservation(&self) -> Reservation {
        self.at
    }

    /// Whoever wrote and read the bytes on this side is done with them.
    pub fn done_here(&self) {
        self.done_here.store(true, Ordering::Release);
    }

    pub fn is_published(&self) -> bool {
        self.published_in.load(Ordering::Acquire) != UNPUBLISHED
    }
}

/// The producer end. One sender at a time (the connection's send lock).
pub struct Producer {
    memory: RingMemory,
    desc_tail: u64,
    data_tail: u64,
    cached_desc_head: u64,
    cached_data_head: u64,
    /// The furthest end of any span published: a consumer whose head
    /// stands there has released everything it was sent.
    published_end: u64,
    /// Spans reserved ahead of their frame, by position.
    held: Vec<Arc<HeldSpan>>,
    /// Once the tail is past this many bytes of a lap, a span goes back to
    /// the first pages when it fits there ([`place_leaving`](Self::place_leaving)).
    prefix: u64,
}

/// A consistent read of the consumer's [`HoldsLine`].
struct Holds {
    count: usize,
    live_from: u64,
    spans: [(u64, u64); HOLDS],
}

/// Where a reserved span lies; write its bytes, then [`Producer::publish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    pub position: u64,
    pub len: u64,
}

impl Producer {
    /// # Safety
    /// `memory` must describe live shared memory laid out as this module
    /// says (slots zeroed or left by this protocol), whose producer end
    /// nobody else drives.
    pub unsafe fn new(memory: RingMemory) -> Producer {
        let control = memory.control();
        let desc_head = control.consumer.desc_head.load(Ordering::Acquire);
        let data_head = control.consumer.data_head.load(Ordering::Acquire);
        Producer {
            memory,
            desc_tail: desc_head,
            data_tail: data_head,
            cached_desc_head: desc_head,
            cached_data_head: data_head,
            published_end: data_head,
            held: Vec::new(),
            prefix: memory.capacity,
        }
    }

    /// Keeps spans to the ring's first `prefix` bytes where the consumer's
    /// head allows: once the tail is past them, a span that fits before
    /// the oldest live byte comes round goes back to the first pages. A
    /// reader that keeps the last few frames then cycles through pages
    /// that stay resident (the channel trims only past its first 8 MiB)
    /// and warm in the cache, instead of through the whole ring.
    pub fn keeping_to(mut self, prefix: u64) -> Producer {
        self.prefix = prefix;
        self
    }

    pub fn capacity(&self) -> u64 {
        self.memory.capacity
    }

    /// Whether a slot is free.
    pub fn has_slot(&mut self) -> bool {
        self.has_slots(1)
    }

    /// Whether `count` slots are free.
    pub fn has_slots(&mut self, count: u64) -> bool {
        // Wrapping: a hostile consumer may store a head past our tail.
        let free = |cached: u64| self.desc_tail.wrapping_sub(cached).saturating_add(count) <= self.memory.slots;
        if free(self.cached_desc_head) {
            return true;
        }
        self.cached_desc_head = self.memory.control().consumer.desc_head.load(Ordering::Acquire);
        free(self.cached_desc_head)
    }

    /// A span of `len` bytes (a multiple of 64, at most the capacity) the
    /// consumer has released, or `None` while there is none.
    pub fn reserve(&mut self, len: u64) -> Option<Reservation> {
        self.reserve_leaving(len, 0)
    }

    /// [`reserve`](Self::reserve), leaving `room_after` bytes for other
    /// frames if it goes back to the first pages ([`place_leaving`](Self::place_leaving)).
    fn reserve_leaving(&mut self, len: u64, room_after: u64) -> Option<Reservation> {
        debug_assert!(len > 0 && len % SPAN_ALIGN == 0 && len <= self.memory.capacity);
        let at = self.reserve_unchecked(len, room_after)?;
        assert_eq!(at.position % SPAN_ALIGN, 0, "a span placed off the 64-byte grid");
        Some(at)
    }

    fn reserve_unchecked(&mut self, len: u64, room_after: u64) -> Option<Reservation> {
        self.prune_held();
        if len >= FRESH_HEAD_MIN_BYTES || self.data_tail % self.memory.capacity >= FRESH_HEAD_MIN_BYTES.min(self.prefix)
        {
            // Worth a look at the consumer's line: a span placed while the
            // ring is in fact empty (or, past the prefix, with room before
            // the oldest live byte) goes back to the first pages, which are
            // resident, instead of faulting in new ones. Small frames past
            // the first 64 KiB look too, so a stream of them keeps to those
            // pages and a connection's memory stays flat.
            self.cached_data_head = self.memory.control().consumer.data_head.load(Ordering::Acquire);
        }
        if let Some(at) = self.place_leaving(len, room_after) {
            return Some(at);
        }
        self.cached_data_head = self.memory.control().consumer.data_head.load(Ordering::Acquire);
        self.place_leaving(len, room_after).or_else(|| self.place_between_holds(len))
    }

    /// Places `len` bytes at the first position from the tail on whose
    /// bytes no span the consumer holds lies (by its published holds, or
    /// by its head when it published none) and no span this side holds
    /// ahead of its frame, or `None`. Any arithmetic a hostile consumer
    /// could make overflow gives `None`: it can only refuse itself room.
    fn place_between_holds(&self, len: u64) -> Option<Reservation> {
        let capacity = self.memory.capacity;
        let holds = match self.read_holds() {
            Some(holds) => holds,
            None if !self.held.is_empty() => {
                Holds { count: 0, live_from: self.consumer_data_head(), spans: [(0, 0); HOLDS] }
            }
            None => return None,
        };
        // Both kinds of obstacle as ring offsets `[start, end)`.
        let mut obstacles = [(0u64, 0u64); HOLDS + MAX_HELD];
        let mut count = 0;
        for &(start, end) in &holds.spans[..holds.count] {
            let offset = start % capacity;
            let end = offset.checked_add(end.checked_sub(start)?)?;
            if end > capacity {
                return None;
            }
            // Widened to whole 64-byte units: a span placed just past an
            // obstacle must start aligned, whatever a hostile consumer
            // published (a kernel writes a held span with aligned stores).
            obstacles[count] = (offset - offset % SPAN_ALIGN, end.next_multiple_of(SPAN_ALIGN));
            count += 1;
        }
        for held in &self.held {
            let offset = held.at.position % capacity;
            obstacles[count] = (offset, offset + held.at.len);
            count += 1;
        }
        let mut position = self.data_tail;
        for _ in 0..2 * (HOLDS + MAX_HELD) + 4 {
            let offset = position % capacity;
            if offset + len > capacity {
                position = position.checked_add(capacity - offset)?;
                continue;
            }
            // Every position from `live_from` may be live: the span must
            // end before their bytes come round again.
            if position.checked_add(len)? > holds.live_from.checked_add(capacity)? {
                return None;
            }
            match obstacles[..count].iter().find(|&&(start, end)| start < offset + len && offset < end) {
                Some(&(_, end)) => position += end - offset, // just past it, this lap
                None => return Some(Reservation { position, len }),
            }
        }
        None
    }

    /// Where the bytes this producer may not write begin: the consumer's
    /// head as last read, or the oldest span held ahead of its frame (at
    /// its latest position: see [`latest_position`](Self::latest_position)).
    fn head_for_placing(&self, consumer_head: u64) -> u64 {
        self.oldest_held().map_or(consumer_head, |held| held.min(consumer_head))
    }

    /// The latest position of the oldest span held ahead of its frame.
    fn oldest_held(&self) -> Option<u64> {
        self.held.iter().map(|held| self.latest_position(held.at)).min()
    }

    /// The largest position of `at`'s bytes that ends by the tail. Frames
    /// placed since `at` was reserved never overlap its bytes, so any
    /// position of them (the same offset, a whole number of laps on) names
    /// the same bytes; the latest keeps a span held for long from pinning
    /// the head rule to a position laps behind.
    fn latest_position(&self, at: Reservation) -> u64 {
        debug_assert!(at.position + at.len <= self.data_tail);
        let laps = (self.data_tail - at.len - at.position) / self.memory.capacity;
        at.position + laps * self.memory.capacity
    }

    /// Forgets held spans this side is done with that are either
    /// unpublished or already taken by the consumer (whose head and holds
    /// then account for them).
    fn prune_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let desc_head = self.memory.control().consumer.desc_head.load(Ordering::Acquire);
        let mut unsent: SmallVec<[(u64, u64); 4]> = SmallVec::new();
        self.held.retain(|held| {
            if !held.done_here.load(Ordering::Acquire) {
                return true;
            }
            let slot = held.published_in.load(Ordering::Acquire);
            if slot == UNPUBLISHED {
                unsent.push((held.at.position + held.at.len, held.tail_before));
                return false;
            }
            desc_head <= slot
        });
        // Spans the consumer never saw, reserved last: the tail goes back
        // to where it was before them. Left forward, a tail that jumped to
        // a new lap's first pages for one would bound every later span by
        // the consumer's head in the old lap, with nothing published to
        // move it: the ring would stay too small for large frames.
        unsent.sort_unstable_by_key(|&(end, _)| std::cmp::Reverse(end));
        for (end, tail_before) in unsent {
            if end == self.data_tail {
                self.data_tail = tail_before;
            }
        }
        // A span the consumer took may have moved its head back since it
        // was last read: read again (the consumer stores its head before
        // it releases the slot, so this load sees the take).
        self.cached_data_head = self.memory.control().consumer.data_head.load(Ordering::Acquire);
    }

    /// A span of `len` bytes reserved now for a frame that comes later
    /// ([`publish_split_parts`](Self::publish_split_parts)), or `None` while there is
    /// no room (or [`MAX_HELD`] are held). Nothing is placed over it
    /// until it is published and taken, or dropped unpublished, and this
    /// side is done with it ([`HeldSpan::done_here`]).
    pub fn reserve_held(&mut self, len: u64) -> Option<Arc<HeldSpan>> {
        self.prune_held();
        if self.held.len() >= MAX_HELD {
            return None;
        }
        // Frames go out while it is held: back at the first pages it
        // leaves them room (an eighth of the ring, at most 1 MiB).
        let room_after = (self.memory.capacity / 8).min(HELD_ROOM_AFTER_MAX);
        let at = self.reserve_leaving(len, room_after)?;
        let tail_before = self.data_tail;
        self.data_tail = at.position + at.len;
        let held = Arc::new(HeldSpan {
            at,
            tail_before,
            done_here: AtomicBool::new(false),
            published_in: AtomicU64::new(UNPUBLISHED),
        });
        self.held.push(held.clone());
        Some(held)
    }

    /// The unpublished held span of `len` bytes at ring offset `offset`.
    pub fn held_at(&self, offset: u64, len: u64) -> Option<Arc<HeldSpan>> {
        let capacity = self.memory.capacity;
        self.held
            .iter()
            .find(|held| held.at.position % capacity == offset && held.at.len == len && !held.is_published())
            .cloned()
    }

    /// Whether [`publish_split_parts`](Self::publish_split_parts) would
    /// publish `parts` now: no more than [`MAX_FRAME_SPANS`] of them and
    /// that many free slots, and at least one held span, every one held
    /// here unpublished and named once. A caller that checks first can
    /// account for the frame before any of it is visible to the peer.
    pub fn split_parts_publishable(&mut self, parts: &[SplitPart]) -> bool {
        if parts.is_empty() || parts.len() > MAX_FRAME_SPANS || !self.has_slots(parts.len() as u64) {
            return false;
        }
        let mut any_held = false;
        for (i, part) in parts.iter().enumerate() {
            let SplitPart::Held(held) = part else { continue };
            let ours = self.held.iter().any(|h| Arc::ptr_eq(h, held));
            let twice = parts[..i].iter().any(|p| matches!(p, SplitPart::Held(h) if Arc::ptr_eq(h, held)));
            if !ours || held.is_published() || twice {
                return false;
            }
            any_held = true;
        }
        any_held
    }

    /// Publishes one split frame over `parts`, in order, whose `head_len`
    /// head bytes the caller wrote at
    /// [`split_head_bytes`](Self::split_head_bytes): a [`DESC_SPAN`] slot
    /// for each part but the last, then the [`DESC_SPLIT`] slot. `false`
    /// (nothing published) when [`split_parts_publishable`](Self::split_parts_publishable)
    /// says no.
    ///
    /// Each held span goes out at its latest position, less than a lap
    /// behind the tail, where the consumer accepts it; when the tail sits
    /// exactly at its start (a lap on), at the tail itself, as if placed
    /// now. Fresh parts go out where they were reserved.
    pub fn publish_split_parts(&mut self, parts: &[SplitPart], head: HeadAt) -> bool {
        let (last_kind, head_len) = match head {
            HeadAt::Slot(len) => {
                assert!((64..=INLINE_BYTES).contains(&len), "a split frame's head of {len} bytes");
                (DESC_SPLIT, len as u64)
            }
            HeadAt::FirstSpan(len) => {
                let first = match parts.first() {
                    Some(SplitPart::Fresh(at)) => at.len,
                    _ => 0,
                };
                assert!(
                    len >= 64 && len % SPAN_ALIGN == 0 && len <= first.min(MAX_SPANNED_HEAD),
                    "a split frame's head of {len} bytes in a first span of {first}"
                );
                (DESC_SPLIT_SPANNED_HEAD, len)
            }
        };
        if !self.split_parts_publishable(parts) {
            return false;
        }
        // Fresh parts are this producer's reservations, not yet published:
        // the tail moves past them first, so a held span that goes out at
        // the tail lands after them.
        for part in parts {
            if let SplitPart::Fresh(at) = part {
                debug_assert!(at.position % SPAN_ALIGN == 0 && at.len % SPAN_ALIGN == 0 && at.len > 0);
                self.data_tail = self.data_tail.max(at.position + at.len);
            }
        }
        for (i, part) in parts.iter().enumerate() {
            let (position, len) = match part {
                SplitPart::Held(held) => {
                    let mut position = self.latest_position(held.at);
                    if self.data_tail - position >= self.memory.capacity {
                        // Frames avoid the span's bytes, so a tail a lap or
                        // more past its latest position can only sit at its
                        // start.
                        debug_assert_eq!(
                            self.data_tail % self.memory.capacity,
                            held.at.position % self.memory.capacity
                        );
                        position = self.data_tail;
                        self.data_tail += held.at.len;
                    }
                    held.published_in.store(self.desc_tail, Ordering::Release);
                    (position, held.at.len)
                }
                SplitPart::Fresh(at) => (at.position, at.len),
            };
            self.published_end = self.published_end.max(position + len);
            let last = i + 1 == parts.len();
            self.publish_slot(Descriptor {
                kind: if last { last_kind } else { DESC_SPAN },
                reserved: 0,
                position,
                len,
                reserved2: if last { head_len } else { 0 },
            });
        }
        true
    }

    /// The consumer's published holds, read consistently, or `None` if
    /// they keep changing (or were never written).
    fn read_holds(&self) -> Option<Holds> {
        let line = &self.memory.control().holds;
        for _ in 0..8 {
            let before = line.version.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let count = (line.count.load(Ordering::Relaxed) as usize).min(HOLDS);
            let live_from = line.live_from.load(Ordering::Relaxed);
            let mut spans = [(0u64, 0u64); HOLDS];
            for (i, span) in spans.iter_mut().enumerate().take(count) {
                *span = (line.spans[2 * i].load(Ordering::Relaxed), line.spans[2 * i + 1].load(Ordering::Relaxed));
            }
            fence(Ordering::Acquire);
            if before != 0 && line.version.load(Ordering::Relaxed) == before {
                return Some(Holds { count, live_from, spans });
            }
        }
        None
    }

    /// A value that changes whenever the consumer releases data: its head,
    /// and the version of its published holds.
    pub fn consumer_progress(&self) -> u64 {
        let control = self.memory.control();
        let head = control.consumer.data_head.load(Ordering::Acquire);
        head.rotate_left(32) ^ control.holds.version.load(Ordering::Acquire)
    }

    /// Where `len` bytes go now, if they fit: at the tail, or at the next
    /// lap when the rest of this one is too short or when the ring is empty
    /// and they fit before the tail's offset (back to the first pages),
    /// leaving `room_after` bytes there: other frames may go out while a
    /// held span is unpublished, and behind a span back at the first pages
    /// they get only that room.
    ///
    /// The bytes a span may take end within a lap of the oldest span held
    /// here, and within a lap of the consumer's head, which every span it
    /// has lent lies past. When that head stands at the end of everything
    /// published, the consumer has lent nothing: then only its rule for
    /// the next span bounds it (a start less than [`AHEAD_LAPS`] laps
    /// past that end), so a span held at the first pages leaves the rest
    /// of the ring to frames after it, not just the bytes up to where the
    /// last lap ended.
    fn place_leaving(&self, len: u64, room_after: u64) -> Option<Reservation> {
        let capacity = self.memory.capacity;
        let offset = self.data_tail % capacity;
        let next_lap = self.data_tail + (capacity - offset);
        let consumer_head = self.cached_data_head;
        let held_head = self.oldest_held();
        let head = held_head.map_or(consumer_head, |h| h.min(consumer_head));
        let drained = consumer_head == self.published_end;
        // Checked: a consumer that stored a head past our tail gets no room,
        // not an overflow.
        let within_a_lap = |end: u64, of: u64| end.checked_sub(of).is_some_and(|n| n <= capacity);
        let fits_bytes = |position: u64, len: u64| {
            let Some(end) = position.checked_add(len) else { return false };
            if drained {
                held_head.is_none_or(|h| within_a_lap(end, h))
                    && position.checked_sub(consumer_head).is_some_and(|n| n < AHEAD_LAPS * capacity)
            } else {
                within_a_lap(end, head)
            }
        };
        let fits = |position: u64| fits_bytes(position, len);
        // Next lap when the rest of this one is too short, or when the ring
        // is empty and the span fits before the current offset (back to the
        // first pages), or when the tail is past the prefix and the span
        // fits the next lap's first pages before the oldest live byte.
        let empty_and_fits_first_pages =
            offset != 0 && head == self.data_tail && len.saturating_add(room_after) <= offset;
        let past_prefix_and_fits_first_pages = offset >= self.prefix
            && len.saturating_add(room_after) <= offset
            && fits_bytes(next_lap, len.saturating_add(room_after));
        let position = if empty_and_fits_first_pages || past_prefix_and_fits_first_pages || offset + len > capacity {
            next_lap
        } else {
            self.data_tail
        };
        fits(position).then_some(Reservation { position, len })
    }

    /// The bytes of a reservation, for the caller to fill.
    pub fn bytes(&self, at: Reservation) -> *mut u8 {
        // The offset plus length lies inside the ring (checked by `place`).
        self.memory.data.wrapping_add((at.position % self.memory.capacity) as usize)
    }

    /// The next slot's inline bytes ([`INLINE_BYTES`] of them), for the
    /// caller to fill before [`publish_inline`](Self::publish_inline). The
    /// caller checked [`has_slot`](Self::has_slot).
    pub fn inline_bytes(&self) -> *mut u8 {
        // SAFETY (of the projection): the slot lies in the mapping; no
        // reference is made, only an address.
        unsafe { std::ptr::addr_of_mut!((*self.memory.slot(self.desc_tail)).inline) }.cast::<u8>()
    }

    /// Where a split frame of `spans` spans takes its head: the inline
    /// bytes of its last slot, the [`DESC_SPLIT`] one.
    pub fn split_head_bytes(&self, spans: usize) -> *mut u8 {
        let index = self.desc_tail + spans.max(1) as u64 - 1;
        // SAFETY (of the projection): the slot lies in the mapping (the
        // index is masked); no reference is made, only an address.
        unsafe { std::ptr::addr_of_mut!((*self.memory.slot(index)).inline) }.cast::<u8>()
    }

    /// Publishes a filled reservation (or, with `None`, a via-socket
    /// marker). The caller checked [`has_slot`](Self::has_slot).
    pub fn publish(&mut self, at: Option<Reservation>) {
        let (kind, position, len) = match at {
            Some(at) => (DESC_FRAME, at.position, at.len),
            None => (DESC_VIA_SOCKET, self.data_tail, 0),
        };
        if let Some(at) = at {
            self.data_tail = at.position + at.len;
            self.published_end = self.published_end.max(self.data_tail);
        }
        self.publish_slot(Descriptor { kind, reserved: 0, position, len, reserved2: 0 });
    }

    /// Writes `words` into the next slot's first line, with the kind word
    /// of a `len`-byte line frame in place of their first 4 bytes, and
    /// publishes it: the line the consumer spins on takes seven word
    /// stores and the publish word. The caller checked
    /// [`has_slot`](Self::has_slot).
    pub fn publish_line_words(&mut self, mut words: LineWords, len: usize) {
        assert!(len > 0 && len <= LINE_BYTES, "a line frame of {len} bytes");
        debug_assert!(
            self.desc_tail.wrapping_sub(self.cached_desc_head) < self.memory.slots,
            "publish without a free slot"
        );
        let mut first = words[0].to_ne_bytes();
        first[..4].copy_from_slice(&(DESC_LINE | (len as u32) << 8).to_ne_bytes());
        words[0] = u64::from_ne_bytes(first);
        let slot = self.memory.slot(self.desc_tail);
        // SAFETY: as `publish_slot`: the slot is free and read only after
        // its publish word's `Release` store below. The words lie in the
        // slot's first line, from its kind word (8-byte aligned: byte 8).
        unsafe {
            let line = std::ptr::addr_of_mut!((*slot).descriptor).cast::<u64>();
            for (i, word) in words.iter().enumerate() {
                std::ptr::write_volatile(line.add(i), *word);
            }
        }
        self.desc_tail += 1;
        self.memory.seq(self.desc_tail - 1).store(self.desc_tail, Ordering::Release);
    }

    /// Publishes the `len` bytes written at [`inline_bytes`](Self::inline_bytes).
    pub fn publish_inline(&mut self, len: usize) {
        assert!(len > 0 && len <= INLINE_BYTES, "an inline frame of {len} bytes");
        self.publish_slot(Descriptor { kind: DESC_INLINE, reserved: 0, position: 0, len: len as u64, reserved2: 0 });
    }

    fn publish_slot(&mut self, descriptor: Descriptor) {
        debug_assert!(
            self.desc_tail.wrapping_sub(self.cached_desc_head) < self.memory.slots,
            "publish without a free slot"
        );
        let slot = self.memory.slot(self.desc_tail);
        // SAFETY: the slot lies in the mapping and is free: the consumer
        // released it (`has_slot`) and reads it only after the `Release`
        // store of its publish word below.
        unsafe { std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).descriptor), descriptor) };
        self.desc_tail += 1;
        self.memory.seq(self.desc_tail - 1).store(self.desc_tail, Ordering::Release);
    }

    /// Rings the doorbell when the consumer may be asleep: the `SeqCst`
    /// fence pairs with the consumer's (see `doorbell.rs`).
    pub fn consumer_may_sleep(&self) -> bool {
        fence(Ordering::SeqCst);
        self.memory.doorbell().sleeping.load(Ordering::Relaxed) != 0
    }

    pub fn memory(&self) -> &RingMemory {
        &self.memory
    }

    /// The consumer's data head as it stands now.
    pub fn consumer_data_head(&self) -> u64 {
        self.memory.control().consumer.data_head.load(Ordering::Acquire)
    }

    /// The data ring's free bytes now, as up to two `[start, end)` offset
    /// ranges (empty ones have `start == end`): bytes only the producer may
    /// write, which the consumer reads only after a later publish.
    pub fn free_ranges(&self) -> [(u64, u64); 2] {
        let capacity = self.memory.capacity;
        let head = self.head_for_placing(self.consumer_data_head());
        // A head past our tail is a broken peer: report nothing free.
        let used = self.data_tail.checked_sub(head).filter(|&u| u <= capacity).unwrap_or(capacity);
        let free = capacity - used;
        let start = self.data_tail % capacity;
        let first_end = (start + free).min(capacity);
        let wrapped = free - (first_end - start);
        [(start, first_end), (0, wrapped)]
    }

    /// Whether every published span has been released.
    pub fn is_drained(&self) -> bool {
        self.head_for_placing(self.consumer_data_head()) == self.data_tail
    }
}

/// The spans the consumer has lent out, released in any order; from them
/// the consumer derives `data_head` (the oldest live span's start) and the
/// holds it publishes.
struct Lent {
    memory: RingMemory,
    /// Live spans by position: start → end.
    live: BTreeMap<u64, u64>,
    /// The same spans by ring offset (they never overlap): start → end.
    by_offset: BTreeMap<u64, u64>,
    /// The end of the last span taken: the next may not start before it.
    expected: u64,
    /// `data_head` as last stored.
    head: u64,
    /// How many ranges the live spans make (spans that touch, within a
    /// lap, share one), and their bytes.
    ranges: usize,
    bytes: u64,
}

impl Lent {
    /// The live span whose bytes `[offset, offset + len)` would overlap.
    fn overlapping(&self, offset: u64, len: u64) -> Option<u64> {
        let (&start, &end) = self.by_offset.range(..offset + len).next_back()?;
        (end > offset).then_some(start)
    }

    /// Whether the live spans `[.., at)` and `[at, ..)` share a range: they
    /// touch, and not across the end of a lap (as ring offsets a range
    /// never wraps).
    fn touch(&self, at: u64) -> bool {
        at % self.memory.capacity != 0
    }

    /// Whether a live span ends at `position`, and one starts at `end`.
    fn neighbours(&self, position: u64, end: u64) -> (bool, bool) {
        let before =
            self.live.range(..position).next_back().is_some_and(|(_, &e)| e == position) && self.touch(position);
        let after = self.live.contains_key(&end) && self.touch(end);
        (before, after)
    }

    fn take(&mut self, position: u64, end: u64) {
        let capacity = self.memory.capacity;
        let (before, after) = self.neighbours(position, end);
        // A span touching neither neighbour is a range of its own; one
        // touching both joins theirs.
        self.ranges = (self.ranges + 1).saturating_sub(usize::from(before) + usize::from(after));
        self.bytes += end - position;
        self.live.insert(position, end);
        self.by_offset.insert(position % capacity, position % capacity + (end - position));
        let behind = position < self.expected;
        self.expected = self.expected.max(end);
        self.store_head();
        if behind {
            // A table published before this take leaves its bytes out of
            // every span and below `live_from`: free, by its reading.
            // Republished before the slot is released, so a producer that
            // sees the slot taken reads a table that holds the span.
            self.publish_holds();
        }
    }

    fn release(&mut self, start: u64) {
        let Some(end) = self.live.remove(&start) else {
            debug_assert!(false, "span at {start} released twice");
            return;
        };
        let capacity = self.memory.capacity;
        self.by_offset.remove(&(start % capacity));
        debug_assert!(end > start);
        let (before, after) = self.neighbours(start, end);
        // Undoes `take`: a span between two touching ones splits a range.
        self.ranges = (self.ranges + usize::from(before) + usize::from(after)).saturating_sub(1);
        self.bytes -= end - start;
        debug_assert_eq!(self.ranges == 0, self.live.is_empty());
        self.store_head();
        if !self.live.is_empty() {
            self.publish_holds();
        }
    }

    fn store_head(&mut self) {
        let head = self.live.first_key_value().map_or(self.expected, |(&start, _)| start);
        if head != self.head {
            self.head = head;
            self.memory.control().consumer.data_head.store(head, Ordering::Release);
        }
    }

    /// Publishes the ranges of the oldest live spans and where the rest
    /// begin, under the sequence lock. Only on release: a table older than
    /// the spans taken since is still safe for the producer, as all of
    /// those lie past the `live_from` it gives.
    fn publish_holds(&self) {
        let line = &self.memory.control().holds;
        let version = line.version.load(Ordering::Relaxed);
        line.version.store(version.wrapping_add(1) | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let list = |count: &mut usize, (from, to): (u64, u64)| {
            line.spans[2 * *count].store(from, Ordering::Relaxed);
            line.spans[2 * *count + 1].store(to, Ordering::Relaxed);
            *count += 1;
        };
        let mut count = 0;
        let mut live_from = self.expected;
        let mut range: Option<(u64, u64)> = None;
        for (&start, &end) in &self.live {
            match range {
                Some((from, to)) if to == start && self.touch(start) => range = Some((from, end)),
                Some(done) => {
                    list(&mut count, done);
                    range = Some((start, end));
                    if count == HOLDS {
                        live_from = start;
                        range = None;
                        break;
                    }
                }
                None => range = Some((start, end)),
            }
        }
        if let Some(done) = range {
            list(&mut count, done);
        }
        debug_assert!(count == self.ranges.min(HOLDS));
        line.count.store(count as u64, Ordering::Relaxed);
        line.live_from.store(live_from, Ordering::Relaxed);
        line.version.store((version | 1).wrapping_add(1), Ordering::Release);
    }
}

/// A span of the data ring lent to whatever reads it; released on drop.
/// Holds `keep` (the mapping) so the memory outlives the ring's handles.
pub struct LentSpan {
    start: u64,
    lent: Arc<Mutex<Lent>>,
    keep: Option<Arc<dyn Send + Sync>>,
}

impl std::fmt::Debug for LentSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LentSpan({}..)", self.start)
    }
}

impl LentSpan {
    /// Ties the span to whatever keeps its memory mapped.
    pub fn keeping(mut self, keep: Arc<dyn Send + Sync>) -> LentSpan {
        self.keep = Some(keep);
        self
    }
}

impl Drop for LentSpan {
    fn drop(&mut self) {
        self.lent.lock().release(self.start);
        // `keep` drops after the release is stored: the store is to the
        // mapping it keeps alive.
        drop(self.keep.take());
    }
}

/// The consumer end. One reader at a time (the connection's reader).
pub struct Consumer {
    memory: RingMemory,
    desc_head: u64,
    lent: Arc<Mutex<Lent>>,
    /// Spans of a split frame whose [`DESC_SPLIT`] slot is still to come.
    pending: Vec<SplitSpan>,
}

impl Consumer {
    /// # Safety
    /// As [`Producer::new`], for the consumer end.
    pub unsafe fn new(memory: RingMemory) -> Consumer {
        let control = memory.control();
        let desc_head = control.consumer.desc_head.load(Ordering::Acquire);
        let data_head = control.consumer.data_head.load(Ordering::Acquire);
        let lent = Lent {
            memory,
            live: BTreeMap::new(),
            by_offset: BTreeMap::new(),
            expected: data_head,
            head: data_head,
            ranges: 0,
            bytes: 0,
        };
        Consumer { memory, desc_head, lent: Arc::new(Mutex::new(lent)), pending: Vec::new() }
    }

    /// Whether the next slot is published (an `Acquire` load of its word).
    pub fn has_pending(&self) -> bool {
        self.memory.seq(self.desc_head).load(Ordering::Acquire) == self.desc_head + 1
    }

    /// The next slot's line frame ([`DESC_LINE`]), its whole line copied
    /// out (the frame is its first `len` bytes) and the slot released:
    /// `None` when the next slot is not published or holds another kind
    /// (which [`poll`](Self::poll) then takes, refusing what it must). The
    /// small frames of a call take this path: no descriptor, no enum of
    /// every kind to build and unpack.
    pub fn take_line(&mut self) -> Result<Option<(LineWords, usize)>, RingError> {
        if !self.pending.is_empty() || !self.has_pending() {
            return Ok(None);
        }
        let index = self.desc_head;
        let slot = self.memory.slot(index);
        // SAFETY: the slot lies in the mapping; the `Acquire` load of its
        // publish word in `has_pending` made the producer's writes
        // visible. The kind word and the line are copied out, a word at a
        // time, before they are checked; the words lie inside the slot's
        // first line, from its kind word (8-byte aligned: byte 8).
        let words: LineWords = unsafe {
            let line = std::ptr::addr_of!((*slot).descriptor).cast::<u64>();
            std::array::from_fn(|i| std::ptr::read_volatile(line.add(i)))
        };
        let first = words[0].to_ne_bytes();
        let kind = u32::from_ne_bytes([first[0], first[1], first[2], first[3]]);
        if kind & 0xff != DESC_LINE {
            return Ok(None);
        }
        let len = u64::from(kind >> 8);
        if len == 0 || len > LINE_BYTES as u64 {
            return Err(RingError::LineLength { index, len });
        }
        self.release_slot();
        Ok(Some((words, len as usize)))
    }

    /// Takes the next slot, checked, or `None` when there is none. An
    /// inline frame's bytes are handed to `copy_inline` (address, length
    /// and form, inside the slot; a line frame's address has a whole
    /// line's [`LINE_BYTES`] after it) before the slot is released; the
    /// peer can still write them, so the callee copies them out before
    /// checking.
    /// A split frame's leading spans are taken as their slots come, and
    /// returned with its last slot.
    pub fn poll<T>(
        &mut self,
        copy_inline: impl FnOnce(*const u8, usize, InlineForm) -> T,
    ) -> Result<Option<Received<T>>, RingError> {
        loop {
            if !self.has_pending() {
                return Ok(None);
            }
            let index = self.desc_head;
            let slot = self.memory.slot(index);
            // SAFETY: the slot lies in the mapping; the `Acquire` load of its
            // publish word in `has_pending` made the producer's writes visible.
            // It is copied out before anything is checked, so a producer
            // writing it again cannot change what was checked.
            let descriptor = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*slot).descriptor)) };
            if !self.pending.is_empty() && !matches!(descriptor.kind, DESC_SPAN | DESC_SPLIT | DESC_SPLIT_SPANNED_HEAD)
            {
                return Err(RingError::SpanWithoutSplit { index, kind: descriptor.kind });
            }
            if descriptor.kind & 0xff == DESC_LINE {
                let len = u64::from(descriptor.kind >> 8);
                if len == 0 || len > LINE_BYTES as u64 {
                    return Err(RingError::LineLength { index, len });
                }
                // Inside the slot's first line (LINE_OFFSET + len <= 64);
                // the callee reads `len` bytes from it.
                let bytes = slot.cast::<u8>().cast_const().wrapping_add(LINE_OFFSET);
                let received = Received::Inline(copy_inline(bytes, len as usize, InlineForm::Line));
                self.release_slot();
                return Ok(Some(received));
            }
            let received = match descriptor.kind {
                DESC_INLINE => {
                    let len = descriptor.len;
                    if len == 0 || len > INLINE_BYTES as u64 {
                        return Err(RingError::InlineLength { index, len });
                    }
                    // SAFETY (of the projection): an address inside the slot;
                    // the callee reads `len` <= INLINE_BYTES bytes from it.
                    let bytes = unsafe { std::ptr::addr_of!((*slot).inline) }.cast::<u8>();
                    Received::Inline(copy_inline(bytes, len as usize, InlineForm::Slot))
                }
                DESC_VIA_SOCKET => Received::ViaSocket,
                DESC_FRAME => {
                    let (offset, len, span) = self.take_span(index, descriptor.position, descriptor.len)?;
                    Received::Frame { offset, len, span }
                }
                DESC_SPLIT_SPANNED_HEAD => {
                    let mut spans = self.take_last_span(index, &descriptor)?;
                    let head_len = descriptor.reserved2;
                    let first_len = spans[0].len as u64;
                    if head_len < 64 || head_len % SPAN_ALIGN != 0 || head_len > first_len.min(MAX_SPANNED_HEAD) {
                        return Err(RingError::SpannedHeadLength { index, len: head_len, span: first_len });
                    }
                    let head_len = head_len as usize;
                    let mut head = vec![0u8; head_len];
                    // SAFETY: the first span is lent to us and lies inside
                    // the ring (`take_span`); `head_len` <= its length.
                    // Copied before anything reads it: the peer can still
                    // write the ring.
                    unsafe { std::ptr::copy_nonoverlapping(self.bytes(spans[0].offset), head.as_mut_ptr(), head_len) };
                    if head_len == spans[0].len {
                        spans.remove(0);
                    } else {
                        spans[0].offset += head_len;
                        spans[0].len -= head_len;
                    }
                    Received::Split { head: SplitHead { bytes: head }, spans }
                }
                DESC_SPAN => {
                    if self.pending.len() + 1 >= MAX_FRAME_SPANS {
                        return Err(RingError::TooManySpans { index });
                    }
                    let (offset, len, span) = self.take_span(index, descriptor.position, descriptor.len)?;
                    self.pending.push(SplitSpan { offset, len, span });
                    self.release_slot();
                    continue;
                }
                DESC_SPLIT => {
                    let head_len = descriptor.reserved2;
                    if !(64..=INLINE_BYTES as u64).contains(&head_len) {
                        return Err(RingError::SplitHeadLength { index, len: head_len });
                    }
                    let mut head = SplitHead { bytes: vec![0; head_len as usize] };
                    // SAFETY: `head_len` <= INLINE_BYTES bytes inside the slot,
                    // published (as above); copied before anything reads them.
                    unsafe {
                        let from = std::ptr::addr_of!((*slot).inline).cast::<u8>();
                        std::ptr::copy_nonoverlapping(from, head.bytes.as_mut_ptr(), head.bytes.len());
                    }
                    let spans = self.take_last_span(index, &descriptor)?;
                    Received::Split { head, spans }
                }
                kind => return Err(RingError::UnknownKind { index, kind }),
            };
            self.release_slot();
            return Ok(Some(received));
        }
    }

    /// A split frame's last span, after the ones its earlier slots named.
    fn take_last_span(&mut self, index: u64, descriptor: &Descriptor) -> Result<Vec<SplitSpan>, RingError> {
        let (offset, len, span) = self.take_span(index, descriptor.position, descriptor.len)?;
        let mut spans = std::mem::take(&mut self.pending);
        spans.push(SplitSpan { offset, len, span });
        Ok(spans)
    }

    /// The slot at `desc_head` was copied out: it is the producer's again.
    fn release_slot(&mut self) {
        self.desc_head += 1;
        self.memory.control().consumer.desc_head.store(self.desc_head, Ordering::Release);
    }

    fn take_span(&mut self, index: u64, position: u64, len: u64) -> Result<(usize, usize, LentSpan), RingError> {
        let capacity = self.memory.capacity;
        if len == 0 || len % SPAN_ALIGN != 0 || position % SPAN_ALIGN != 0 {
            return Err(RingError::Misaligned { index, position, len });
        }
        let offset = position % capacity;
        if len > capacity || offset + len > capacity {
            return Err(RingError::OutsideRing { index, position, len, capacity });
        }
        let mut lent = self.lent.lock();
        // Spans come near the furthest end so far: after it, where the
        // producer may skip bytes (the rest of a lap, a span still lent, or
        // spans of its own held while this side had released everything),
        // or less than a lap behind it (a span held for a kernel's output
        // while later frames went out).
        let behind = lent.expected.checked_sub(position).is_some_and(|d| d >= capacity);
        let ahead = position.checked_sub(lent.expected).is_some_and(|d| d >= AHEAD_LAPS * capacity);
        if behind || ahead {
            return Err(RingError::OutOfSequence { index, position, expected: lent.expected });
        }
        if let Some(held) = lent.overlapping(offset, len) {
            return Err(RingError::Overlap { index, position, len, lent: held });
        }
        let end = position + len;
        lent.take(position, end);
        drop(lent);
        Ok((offset as usize, len as usize, LentSpan { start: position, lent: self.lent.clone(), keep: None }))
    }

    /// Whether the frame just taken, in `spans` spans, should be copied out
    /// of the ring and its spans dropped at once rather than lent to its
    /// tensors:
    /// - when the live spans make more than [`HOLDS`] ranges: the ranges
    ///   past them are not in the published holds, so the producer must
    ///   treat every byte from the first of them on as live, and a reader
    ///   that kept them past a lap would stop the ring;
    /// - when other spans are lent and with this frame's more than
    ///   [`LENT_BYTES_SHARE`] of the ring would be: a reader that keeps
    ///   what it receives would otherwise fill the ring.
    pub fn should_copy_out(&self, spans: usize) -> bool {
        let lent = self.lent.lock();
        let (share, of) = LENT_BYTES_SHARE;
        lent.ranges > HOLDS || (lent.live.len() > spans && lent.bytes > self.memory.capacity / of * share)
    }

    /// The data ring's bytes at `offset` (inside it, as `poll` checked).
    pub fn bytes(&self, offset: usize) -> *mut u8 {
        self.memory.data.wrapping_add(offset)
    }

    /// Says the consumer may sleep, then checks once more for work: `true`
    /// when it may sleep on the doorbell word it returns. The `SeqCst` fence
    /// pairs with [`Producer::consumer_may_sleep`].
    pub fn prepare_sleep(&mut self) -> Option<u32> {
        let memory = self.memory;
        let doorbell = memory.doorbell();
        let seq = doorbell.seq.load(Ordering::Acquire);
        doorbell.sleeping.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.has_pending() {
            doorbell.sleeping.store(0, Ordering::Relaxed);
            return None;
        }
        Some(seq)
    }

    pub fn woke(&self) {
        self.memory.doorbell().sleeping.store(0, Ordering::Relaxed);
    }

    pub fn memory(&self) -> &RingMemory {
        &self.memory
    }
}

/// Heap-backed ring memory for tests (Miri runs these).
#[cfg(test)]
pub(crate) mod test_memory {
    use super::*;

    #[repr(C, align(64))]
    pub struct Block([u8; 64]);

    pub struct HeapRing {
        pub control: Box<RingControl>,
        pub slots: Vec<Slot>,
        pub data: Vec<Block>,
    }

    pub fn empty_slot() -> Slot {
        Slot { seq: AtomicU64::new(0), descriptor: Descriptor::default(), inline: [0; INLINE_BYTES] }
    }

    impl HeapRing {
        pub fn new(slots: u64, capacity: u64) -> Box<HeapRing> {
            Box::new(HeapRing {
                control: Box::new(RingControl {
                    wait_note: WaitNoteLine { waiting_cpu: AtomicU32::new(0) },
                    consumer: ConsumerLine { desc_head: AtomicU64::new(0), data_head: AtomicU64::new(0) },
                    doorbell: DoorbellLine { seq: AtomicU32::new(0), sleeping: AtomicU32::new(0) },
                    holds: HoldsLine {
                        version: AtomicU64::new(0),
                        count: AtomicU64::new(0),
                        live_from: AtomicU64::new(0),
                        spans: std::array::from_fn(|_| AtomicU64::new(0)),
                    },
                }),
                slots: (0..slots).map(|_| empty_slot()).collect(),
                data: (0..capacity / 64).map(|_| Block([0; 64])).collect(),
            })
        }

        /// Writes slot `index` as a producer would publish it.
        pub fn set_slot(&mut self, index: u64, descriptor: Descriptor) {
            let count = self.slots.len() as u64;
            let slot = &mut self.slots[(index % count) as usize];
            slot.descriptor = descriptor;
            slot.seq.store(index + 1, Ordering::Release);
        }

        pub fn memory(&mut self) -> RingMemory {
            RingMemory {
                control: &*self.control,
                slots_base: self.slots.as_mut_ptr(),
                slots: self.slots.len() as u64,
                data: self.data.as_mut_ptr().cast(),
                capacity: self.data.len() as u64 * 64,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_memory::HeapRing;
    use super::*;
    use std::collections::VecDeque;

    /// A heap ring with its producer and consumer ends.
    fn fresh(slots: u64, capacity: u64) -> (Box<HeapRing>, Producer, Consumer) {
        let mut heap = HeapRing::new(slots, capacity);
        let memory = heap.memory();
        // SAFETY: fresh ring memory (boxed: it stays put while the ends
        // live beside it), one producer and one consumer.
        let (producer, consumer) = unsafe { (Producer::new(memory), Consumer::new(memory)) };
        (heap, producer, consumer)
    }

    fn write_span(producer: &Producer, at: Reservation, fill: u8) {
        // SAFETY: a reservation's bytes are the producer's until published.
        unsafe { std::ptr::write_bytes(producer.bytes(at), fill, at.len as usize) };
    }

    /// Polls, copying an inline frame's bytes out.
    /// An inline frame's bytes, copied out, and the form it took.
    type Copied = (Vec<u8>, InlineForm);

    fn poll_copy(consumer: &mut Consumer) -> Result<Option<Received<Copied>>, RingError> {
        // SAFETY: `poll` hands over `len` bytes inside the slot.
        consumer.poll(|at, len, form| (unsafe { std::slice::from_raw_parts(at, len).to_vec() }, form))
    }

    fn read_span(consumer: &Consumer, offset: usize, len: usize) -> Vec<u8> {
        // SAFETY: a lent span lies inside the ring and is not written while
        // lent.
        unsafe { std::slice::from_raw_parts(consumer.bytes(offset), len).to_vec() }
    }

    #[test]
    fn free_ranges_are_the_bytes_no_live_span_holds() {
        let (mut heap, mut producer, mut consumer) = fresh(4, 512);
        let memory = heap.memory();
        assert_eq!(producer.free_ranges(), [(0, 512), (0, 0)]);
        assert!(producer.is_drained());
        let a = producer.reserve(192).unwrap();
        producer.publish(Some(a));
        assert_eq!(producer.free_ranges(), [(192, 512), (0, 0)], "published, not yet released");
        let b = producer.reserve(192).unwrap();
        producer.publish(Some(b));
        let Some(Received::Frame { span: span_a, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        let Some(Received::Frame { span: span_b, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        drop(span_a);
        assert_eq!(producer.free_ranges(), [(384, 512), (0, 192)], "free space wraps past the end");
        assert!(!producer.is_drained());
        drop(span_b);
        assert_eq!(producer.free_ranges(), [(384, 512), (0, 384)]);
        assert!(producer.is_drained());
        // A consumer that claims a head past the producer's tail frees nothing.
        memory.control().consumer.data_head.store(10_000, Ordering::Release);
        assert_eq!(producer.free_ranges(), [(384, 384), (0, 0)]);
    }

    #[test]
    fn spans_cross_in_order_and_a_kept_span_leaves_the_rest_usable() {
        let (_heap, mut producer, mut consumer) = fresh(4, 512);
        let a = producer.reserve(192).unwrap();
        write_span(&producer, a, 1);
        producer.publish(Some(a));
        let b = producer.reserve(192).unwrap();
        write_span(&producer, b, 2);
        producer.publish(Some(b));
        assert!(producer.reserve(192).is_none(), "only 128 bytes left");
        let Some(Received::Frame { offset, len, span: span_a }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!(read_span(&consumer, offset, len), vec![1; 192]);
        let Some(Received::Frame { offset, len, span: span_b }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!(read_span(&consumer, offset, len), vec![2; 192]);
        assert!(producer.reserve(192).is_none(), "nothing released yet");
        drop(span_b);
        // b released before a: the head stays at a, but b's bytes are free
        // again and the next span goes there (next lap, offset 192).
        let c = producer.reserve(192).unwrap();
        assert_eq!((c.position, c.position % 512), (704, 192));
        assert!(producer.has_slot());
        write_span(&producer, c, 3);
        producer.publish(Some(c));
        let Some(Received::Frame { offset, len, span: span_c }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!((offset, read_span(&consumer, offset, len)), (192, vec![3; 192]));
        assert_eq!(read_span(&consumer, 0, 192), vec![1; 192], "a, still lent, is intact");
        assert!(
            producer.reserve(128).is_none(),
            "c lies past the holds published when b was released: it and all after it count as lent"
        );
        drop(span_c);
        drop(span_a);
        // Everything released and the ring empty: back to offset 0.
        let c = producer.reserve(320).unwrap();
        assert_eq!(c.position, 1024);
        assert!(producer.has_slot());
        producer.publish(Some(c));
        assert!(producer.has_slot());
        producer.publish(None);
        let Some(Received::Frame { offset, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!(offset, 0);
        assert!(matches!(poll_copy(&mut consumer).unwrap(), Some(Received::ViaSocket)));
        assert!(poll_copy(&mut consumer).unwrap().is_none());
    }

    #[test]
    fn descriptor_slots_bound_what_is_in_flight() {
        let (_heap, mut producer, mut consumer) = fresh(2, 4096);
        assert!(producer.has_slot());
        producer.publish(None);
        producer.publish(None);
        assert!(!producer.has_slot());
        poll_copy(&mut consumer).unwrap();
        assert!(producer.has_slot());
    }

    /// A hostile producer: every field of a descriptor garbage; each is
    /// refused and nothing is read. A publish word other than the expected
    /// one is "nothing yet".
    #[test]
    fn garbage_descriptors_are_refused() {
        type Case = (Descriptor, fn(&RingError) -> bool);
        let split = |position, len, head| Descriptor { kind: DESC_SPLIT, position, len, reserved2: head, reserved: 0 };
        let cases: [Case; 15] = [
            (Descriptor { kind: 9, ..Default::default() }, |e| matches!(e, RingError::UnknownKind { .. })),
            // Only a line frame's kind word carries a length.
            (Descriptor { kind: DESC_INLINE | 8 << 8, len: 8, ..Default::default() }, |e| {
                matches!(e, RingError::UnknownKind { .. })
            }),
            (Descriptor { kind: DESC_LINE, ..Default::default() }, |e| {
                matches!(e, RingError::LineLength { len: 0, .. })
            }),
            (Descriptor { kind: DESC_LINE | (LINE_BYTES as u32 + 1) << 8, ..Default::default() }, |e| {
                matches!(e, RingError::LineLength { len: 53, .. })
            }),
            (Descriptor { kind: DESC_FRAME, position: 0, len: 100, ..Default::default() }, |e| {
                matches!(e, RingError::Misaligned { .. })
            }),
            (Descriptor { kind: DESC_FRAME, position: 448, len: 128, ..Default::default() }, |e| {
                matches!(e, RingError::OutsideRing { .. })
            }),
            (Descriptor { kind: DESC_FRAME, position: 0, len: 1 << 40, ..Default::default() }, |e| {
                matches!(e, RingError::OutsideRing { .. })
            }),
            (Descriptor { kind: DESC_FRAME, position: 1024, len: 64, ..Default::default() }, |e| {
                matches!(e, RingError::OutOfSequence { .. })
            }),
            (Descriptor { kind: DESC_INLINE, len: INLINE_BYTES as u64 + 1, ..Default::default() }, |e| {
                matches!(e, RingError::InlineLength { .. })
            }),
            (Descriptor { kind: DESC_INLINE, len: 0, ..Default::default() }, |e| {
                matches!(e, RingError::InlineLength { .. })
            }),
            (split(0, 64, 0), |e| matches!(e, RingError::SplitHeadLength { .. })),
            (split(0, 64, 63), |e| matches!(e, RingError::SplitHeadLength { .. })),
            (split(0, 64, INLINE_BYTES as u64 + 1), |e| matches!(e, RingError::SplitHeadLength { .. })),
            (split(0, 100, 64), |e| matches!(e, RingError::Misaligned { .. })),
            (split(448, 128, 64), |e| matches!(e, RingError::OutsideRing { .. })),
        ];
        for (descriptor, expected) in cases {
            let mut heap = HeapRing::new(4, 512);
            heap.set_slot(0, descriptor);
            // SAFETY: fresh ring memory, one consumer.
            let mut consumer = unsafe { Consumer::new(heap.memory()) };
            let err = poll_copy(&mut consumer).unwrap_err();
            assert!(expected(&err), "{descriptor:?}: {err}");
        }
        // Publish words of another lap, or garbage: nothing is published.
        for seq in [0, 2, 5, u64::MAX] {
            let mut heap = HeapRing::new(4, 512);
            heap.slots[0].descriptor = Descriptor { kind: 9, ..Default::default() };
            heap.slots[0].seq.store(seq, Ordering::Release);
            // SAFETY: fresh ring memory, one consumer.
            let mut consumer = unsafe { Consumer::new(heap.memory()) };
            assert!(poll_copy(&mut consumer).unwrap().is_none(), "publish word {seq}");
        }
        // A span overlapping one still lent.
        let mut heap = HeapRing::new(4, 512);
        heap.set_slot(0, Descriptor { kind: DESC_FRAME, position: 0, len: 256, ..Default::default() });
        heap.set_slot(1, Descriptor { kind: DESC_FRAME, position: 512, len: 256, ..Default::default() });
        // SAFETY: fresh ring memory, one consumer.
        let mut consumer = unsafe { Consumer::new(heap.memory()) };
        let _lent = poll_copy(&mut consumer).unwrap();
        assert!(matches!(poll_copy(&mut consumer).unwrap_err(), RingError::Overlap { .. }));
        // Spans announced for a split frame, then anything but more spans
        // or the split frame; or more spans than one frame may have; or a
        // bad span among them.
        let span = |position| Descriptor { kind: DESC_SPAN, position, len: 64, ..Default::default() };
        for (follower, expected) in [
            (Descriptor { kind: DESC_INLINE, len: 64, ..Default::default() }, "SpanWithoutSplit"),
            (Descriptor { kind: DESC_FRAME, position: 64, len: 64, ..Default::default() }, "SpanWithoutSplit"),
            (Descriptor { kind: DESC_VIA_SOCKET, ..Default::default() }, "SpanWithoutSplit"),
            (Descriptor { kind: DESC_LINE | 8 << 8, ..Default::default() }, "SpanWithoutSplit"),
            (Descriptor { kind: DESC_SPAN, position: 0, len: 64, ..Default::default() }, "Overlap"),
            (Descriptor { kind: DESC_SPAN, position: 64, len: 100, ..Default::default() }, "Misaligned"),
        ] {
            let mut heap = HeapRing::new(4, 512);
            heap.set_slot(0, span(0));
            heap.set_slot(1, follower);
            // SAFETY: fresh ring memory, one consumer.
            let mut consumer = unsafe { Consumer::new(heap.memory()) };
            let err = poll_copy(&mut consumer).unwrap_err();
            assert!(format!("{err:?}").starts_with(expected), "{follower:?}: {err:?}");
        }
        let mut heap = HeapRing::new(16, 4096);
        for i in 0..MAX_FRAME_SPANS as u64 {
            heap.set_slot(i, span(64 * i));
        }
        // SAFETY: fresh ring memory, one consumer.
        let mut consumer = unsafe { Consumer::new(heap.memory()) };
        assert!(
            matches!(poll_copy(&mut consumer).unwrap_err(), RingError::TooManySpans { index } if index == MAX_FRAME_SPANS as u64 - 1)
        );
    }

    /// A split frame over several held spans takes one slot per span and
    /// crosses whole: the consumer returns nothing until its last slot,
    /// then every span in order, each lent until it drops. Spans named
    /// twice, more spans than free slots, or than a frame may have, publish
    /// nothing.
    #[test]
    fn a_split_frame_crosses_in_several_held_spans() {
        let (_heap, mut producer, mut consumer) = fresh(8, 4096);
        let helds: Vec<Arc<HeldSpan>> = (0..3).map(|_| producer.reserve_held(512).unwrap()).collect();
        for (i, held) in helds.iter().enumerate() {
            write_span(&producer, held.reservation(), 0x10 + i as u8);
        }
        // A frame goes out before them, behind which they cross.
        let at = producer.reserve(256).unwrap();
        write_span(&producer, at, 0x77);
        assert!(producer.has_slot());
        producer.publish(Some(at));
        assert!(!publish_held(&mut producer, &[helds[0].clone(), helds[0].clone()], 64), "a span twice");
        let many: Vec<Arc<HeldSpan>> = (0..MAX_FRAME_SPANS + 1).map(|_| helds[0].clone()).collect();
        assert!(!publish_held(&mut producer, &many, 64), "more spans than a frame may have");
        assert!(publish_spans_with_head(&mut producer, &helds, 0x5a));
        assert!(helds.iter().all(|h| h.is_published()));
        let Some(Received::Frame { span: first, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        let Some(Received::Split { head, spans }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!(head.bytes(), &[0x5a; 64][..]);
        assert_eq!(spans.len(), 3);
        for (i, (got, held)) in spans.iter().zip(&helds).enumerate() {
            assert_eq!((got.offset as u64, got.len as u64), (held.reservation().position % 4096, 512));
            assert_eq!(read_span(&consumer, got.offset, got.len), vec![0x10 + i as u8; 512]);
        }
        assert!(poll_copy(&mut consumer).unwrap().is_none());
        // Five slots of eight are taken by nothing; four spans need four.
        for held in &helds {
            held.done_here();
        }
        drop(first);
        let more: Vec<Arc<HeldSpan>> = (0..4).map(|_| producer.reserve_held(256).unwrap()).collect();
        for _ in 0..5 {
            let at = producer.reserve(64).unwrap();
            assert!(producer.has_slot());
            producer.publish(Some(at));
        }
        assert!(!producer.has_slots(4) && producer.has_slots(3));
        assert!(!publish_held(&mut producer, &more, 64), "four spans in three free slots");
        assert!(more.iter().all(|h| !h.is_published()));
        // Released: the spans of the first split frame stay lent until
        // they drop, whatever else is released.
        let mut frames = Vec::new();
        while let Some(received) = poll_copy(&mut consumer).unwrap() {
            frames.push(received);
        }
        assert_eq!(frames.len(), 5);
        drop(frames);
        assert!(publish_spans_with_head(&mut producer, &more, 0x33));
        let Some(Received::Split { spans: later, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        for got in &later {
            assert!(spans.iter().all(|s| !overlaps_offsets(got.offset, got.len, s.offset, s.len)));
        }
        for (i, got) in spans.iter().enumerate() {
            assert_eq!(read_span(&consumer, got.offset, got.len), vec![0x10 + i as u8; 512], "span {i} intact");
        }
        drop(spans);
        drop(later);
        for held in &more {
            held.done_here();
        }
        // The next reservation forgets the held spans both sides are done with.
        let at = producer.reserve(64).unwrap();
        assert!(producer.has_slot());
        producer.publish(Some(at));
        drop(poll_copy(&mut consumer).unwrap());
        assert!(producer.is_drained());
    }

    /// A split frame's parts may be fresh reservations beside held spans
    /// (payloads the sender copies): they go out where they were reserved,
    /// a held span published at the tail lands after them, and a frame
    /// with no held span is not a split frame.
    #[test]
    fn fresh_parts_cross_beside_held_spans() {
        let (_heap, mut producer, mut consumer) = fresh(8, 1024);
        let held = producer.reserve_held(256).unwrap();
        write_span(&producer, held.reservation(), 0x21);
        let fresh_at = producer.reserve(256).unwrap();
        assert!(!overlaps(fresh_at, held.reservation(), 1024));
        let halves = [
            Reservation { position: fresh_at.position, len: 128 },
            Reservation { position: fresh_at.position + 128, len: 128 },
        ];
        write_span(&producer, halves[0], 0x31);
        write_span(&producer, halves[1], 0x32);
        let only_fresh = [SplitPart::Fresh(halves[0]), SplitPart::Fresh(halves[1])];
        assert!(!producer.publish_split_parts(&only_fresh, HeadAt::Slot(64)), "no held span: not a split frame");
        let parts = [SplitPart::Fresh(halves[0]), SplitPart::Held(held.clone()), SplitPart::Fresh(halves[1])];
        // SAFETY: free slots' inline bytes are the producer's.
        unsafe { std::ptr::write_bytes(producer.split_head_bytes(parts.len()), 0x44, 64) };
        assert!(producer.publish_split_parts(&parts, HeadAt::Slot(64)));
        let Some(Received::Split { head, spans }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!(head.bytes(), &[0x44; 64][..]);
        let fills: Vec<Vec<u8>> = spans.iter().map(|s| read_span(&consumer, s.offset, s.len)).collect();
        assert_eq!(fills, vec![vec![0x31; 128], vec![0x21; 256], vec![0x32; 128]]);
        // The next frame goes after the fresh bytes.
        let next = producer.reserve(64).unwrap();
        assert!(next.position >= fresh_at.position + fresh_at.len);
        held.done_here();
        drop(spans);
    }

    /// A head too long for a slot starts the frame's first span: the
    /// consumer copies it out and hands over the rest of that span (none,
    /// when the span was the head alone) and the others. A head that is
    /// short, off the 64-byte grid or longer than its span is refused.
    #[test]
    fn a_split_frame_may_carry_its_head_in_its_first_span() {
        let (_heap, mut producer, mut consumer) = fresh(8, 4096);
        for (round, first_len) in [(0u8, 384u64), (1, 192)] {
            let held = producer.reserve_held(512).unwrap();
            write_span(&producer, held.reservation(), 0x21 + round);
            let first = producer.reserve(first_len).unwrap();
            write_span(&producer, Reservation { position: first.position, len: 192 }, 0x44);
            write_span(&producer, Reservation { position: first.position + 192, len: first_len - 192 }, 0x31);
            let parts = [SplitPart::Fresh(first), SplitPart::Held(held.clone())];
            assert!(producer.publish_split_parts(&parts, HeadAt::FirstSpan(192)));
            let Some(Received::Split { head, spans }) = poll_copy(&mut consumer).unwrap() else { panic!() };
            assert_eq!(head.bytes(), &[0x44; 192][..]);
            let fills: Vec<Vec<u8>> = spans.iter().map(|s| read_span(&consumer, s.offset, s.len)).collect();
            let mut want = vec![vec![0x31; (first_len - 192) as usize], vec![0x21 + round; 512]];
            want.retain(|fill| !fill.is_empty());
            assert_eq!(fills, want, "round {round}");
            held.done_here();
        }
        let spanned = |len: u64, head: u64| Descriptor {
            kind: DESC_SPLIT_SPANNED_HEAD,
            position: 0,
            len,
            reserved2: head,
            reserved: 0,
        };
        for (descriptor, why) in
            [(spanned(256, 0), "short"), (spanned(256, 100), "off the grid"), (spanned(256, 320), "past its span")]
        {
            let mut heap = HeapRing::new(4, 512);
            heap.set_slot(0, descriptor);
            // SAFETY: fresh ring memory, one consumer.
            let mut consumer = unsafe { Consumer::new(heap.memory()) };
            let err = poll_copy(&mut consumer).unwrap_err();
            assert!(matches!(err, RingError::SpannedHeadLength { .. }), "{why}: {err:?}");
        }
    }

    /// A held span that went back to the ring's first pages and was
    /// dropped unpublished takes the tail with it: the ring is whole again
    /// for the next frame, not bounded by the consumer's head a lap back.
    #[test]
    fn a_held_span_dropped_unsent_gives_the_tail_back() {
        const KIB: u64 = 1024;
        let (_heap, mut producer, mut consumer) = fresh(8, 1024 * KIB);
        let at = producer.reserve(256 * KIB).unwrap();
        assert!(producer.has_slot());
        producer.publish(Some(at));
        drop(poll_copy(&mut consumer).unwrap());
        // The ring is empty with its tail at 256 KiB: a held span of 64 KiB
        // goes back to the first pages (the 128 KiB room is left).
        let held = producer.reserve_held(64 * KIB).unwrap();
        assert_eq!(held.reservation().position, 1024 * KIB, "back at the first pages");
        assert!(producer.reserve(1024 * KIB).is_none(), "the whole ring is not free while it is held");
        held.done_here();
        drop(held);
        let at = producer.reserve(1024 * KIB).expect("the whole ring once the unsent span is gone");
        assert!(producer.has_slot());
        producer.publish(Some(at));
        let Some(Received::Frame { len, span, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!(len as u64, 1024 * KIB);
        drop(span);
        assert!(producer.is_drained());
    }

    fn overlaps_offsets(a: usize, a_len: usize, b: usize, b_len: usize) -> bool {
        a < b + b_len && b < a + a_len
    }

    /// Inline frames cross in the slot, in order with spans, and free their
    /// slot as soon as they are copied out; a slot is reused on the next lap.
    #[test]
    fn inline_frames_cross_in_their_slot() {
        let (_heap, mut producer, mut consumer) = fresh(2, 512);
        for lap in 0..3u8 {
            assert!(producer.has_slot());
            // SAFETY: a free slot's inline bytes are the producer's.
            unsafe { std::ptr::write_bytes(producer.inline_bytes(), lap, 100) };
            producer.publish_inline(100);
            let at = producer.reserve(64).unwrap();
            assert!(producer.has_slot());
            write_span(&producer, at, 0xa0 + lap);
            producer.publish(Some(at));
            assert!(!producer.has_slot(), "two slots, both in flight");
            let Some(Received::Inline((bytes, InlineForm::Slot))) = poll_copy(&mut consumer).unwrap() else { panic!() };
            assert_eq!(bytes, vec![lap; 100]);
            assert!(producer.has_slot(), "the inline frame's slot is free once copied");
            let Some(Received::Frame { offset, len, span }) = poll_copy(&mut consumer).unwrap() else { panic!() };
            assert_eq!(read_span(&consumer, offset, len), vec![0xa0 + lap; 64]);
            drop(span);
            assert!(poll_copy(&mut consumer).unwrap().is_none());
        }
    }

    /// Line words whose line frame bytes start with `bytes`.
    fn words_of(bytes: &[u8]) -> LineWords {
        let mut words = [0u64; LINE_WORDS];
        for (i, &byte) in bytes.iter().enumerate() {
            let mut word = words[(i + 4) / 8].to_ne_bytes();
            word[(i + 4) % 8] = byte;
            words[(i + 4) / 8] = u64::from_ne_bytes(word);
        }
        words
    }

    #[test]
    fn line_words_hold_a_line_frames_bytes_after_the_kind_word() {
        let bytes: Vec<u8> = (1..=LINE_BYTES as u8).collect();
        assert_eq!(line_bytes_of(&words_of(&bytes)), bytes[..]);
    }

    /// `take_line` takes line frames alone: anything else stays for
    /// `poll`, in order, and a bad length is refused.
    #[test]
    fn take_line_takes_line_frames_and_leaves_the_rest_to_poll() {
        let (mut heap, mut producer, mut consumer) = fresh(4, 512);
        assert!(consumer.take_line().unwrap().is_none(), "nothing published");
        producer.publish_line_words(words_of(&[0x11; LINE_BYTES]), 20);
        // SAFETY: a free slot's inline bytes are the producer's.
        unsafe { std::ptr::write_bytes(producer.inline_bytes(), 0x22, 30) };
        producer.publish_inline(30);
        let (words, len) = consumer.take_line().unwrap().unwrap();
        assert_eq!((len, &line_bytes_of(&words)[..len]), (20, &[0x11; 20][..]));
        assert!(consumer.take_line().unwrap().is_none(), "an inline frame is poll's");
        let Some(Received::Inline((bytes, InlineForm::Slot))) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!(bytes, vec![0x22; 30]);
        // A line frame with a bad length, written raw.
        heap.set_slot(2, Descriptor { kind: DESC_LINE | 60 << 8, ..Default::default() });
        assert_eq!(consumer.take_line().unwrap_err(), RingError::LineLength { index: 2, len: 60 });
    }

    /// Producer and consumer on two threads, inline frames among spans:
    /// every frame arrives whole and in order, and the producer never
    /// overwrites a span still lent (each is checked after a delay, while
    /// the producer keeps writing) nor a slot not yet copied out.
    #[test]
    fn two_threads_never_share_a_span() {
        // The whole ring, and spans kept to its first quarter.
        for prefix in [1024, 256] {
            two_threads_never_share_a_span_keeping_to(prefix);
        }
    }

    fn two_threads_never_share_a_span_keeping_to(prefix: u64) {
        let rounds: u64 = if cfg!(miri) { 60 } else { 20_000 };
        let inline_len = |i: u64| 1 + (i as usize * 37) % INLINE_BYTES;
        let line_len = |i: u64| 1 + (i as usize * 7) % LINE_BYTES;
        let (_heap, producer, mut consumer) = fresh(8, 1024);
        let mut producer = producer.keeping_to(prefix);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                for i in 0..rounds {
                    while !producer.has_slot() {
                        std::thread::yield_now();
                    }
                    if i % 6 == 0 {
                        // SAFETY: a free slot's inline bytes are the producer's.
                        unsafe { std::ptr::write_bytes(producer.inline_bytes(), i as u8, inline_len(i)) };
                        producer.publish_inline(inline_len(i));
                        continue;
                    }
                    if i % 6 == 3 {
                        producer.publish_line_words(words_of(&vec![i as u8; line_len(i)]), line_len(i));
                        continue;
                    }
                    let len = 64 * (1 + i % 5);
                    let at = loop {
                        if let Some(at) = producer.reserve(len) {
                            break at;
                        }
                        std::thread::yield_now();
                    };
                    write_span(&producer, at, i as u8);
                    producer.publish(Some(at));
                }
            });
            let mut held: VecDeque<(usize, usize, u8, LentSpan)> = VecDeque::new();
            let mut seen = 0u64;
            while seen < rounds {
                // As the channel reads: a line frame first, then the rest.
                if seen % 2 == 1
                    && let Some((words, len)) = consumer.take_line().unwrap()
                {
                    assert_eq!(seen % 6, 3, "frame {seen} was not sent as a line");
                    assert_eq!(&line_bytes_of(&words)[..len], &vec![seen as u8; line_len(seen)][..]);
                    seen += 1;
                    continue;
                }
                match poll_copy(&mut consumer).unwrap() {
                    Some(Received::Frame { offset, len, span }) => {
                        assert_eq!(len as u64, 64 * (1 + seen % 5));
                        held.push_back((offset, len, seen as u8, span));
                        seen += 1;
                        if held.len() > 2 {
                            let (offset, len, fill, span) = held.pop_front().unwrap();
                            assert!(read_span(&consumer, offset, len).iter().all(|&b| b == fill));
                            drop(span);
                        }
                    }
                    Some(Received::Inline((bytes, form))) => {
                        assert_eq!(seen % 3, 0, "frame {seen} was sent as a span");
                        let (len, sent_as) = match seen % 6 {
                            0 => (inline_len(seen), InlineForm::Slot),
                            _ => (line_len(seen), InlineForm::Line),
                        };
                        assert_eq!((bytes, form), (vec![seen as u8; len], sent_as));
                        seen += 1;
                    }
                    Some(other) => panic!("only spans and inline frames sent: {other:?}"),
                    None => std::thread::yield_now(),
                }
            }
        });
    }

    /// Spans that touch share a range in the holds line; the consumer
    /// lists every range while there are at most [`HOLDS`], and says to
    /// copy a frame out when its spans would make more, or when other
    /// spans are lent and the lent bytes pass [`LENT_BYTES_SHARE`] of the
    /// ring.
    #[test]
    fn lent_spans_are_listed_as_ranges_and_past_them_frames_are_copied_out() {
        let (_heap, mut producer, mut consumer) = fresh(256, 64 * 1024);
        let take = |producer: &mut Producer, consumer: &mut Consumer, i: usize| {
            let at = producer.reserve(128).unwrap();
            write_span(producer, at, i as u8);
            producer.publish(Some(at));
            let Some(Received::Frame { span, .. }) = poll_copy(consumer).unwrap() else { panic!("span {i}") };
            span
        };
        // Two ranges of lent spans per three spans taken: keep two that
        // touch, let the third go.
        let mut kept = Vec::new();
        let mut ranges = 0;
        for i in 0.. {
            let span = take(&mut producer, &mut consumer, i);
            if i % 3 == 2 {
                assert!(!consumer.should_copy_out(1), "{ranges} ranges");
                continue; // dropped: a gap
            }
            kept.push(span);
            if i % 3 == 0 {
                ranges += 1;
                if ranges > HOLDS {
                    assert!(consumer.should_copy_out(1), "a range past the listed ones");
                    kept.pop();
                    break;
                }
            }
            assert!(!consumer.should_copy_out(1), "{ranges} ranges");
        }
        // Releasing the first span of the first range keeps it a range;
        // the table then lists all of them, and they are every lent byte.
        kept.remove(0);
        let holds = producer.read_holds().unwrap();
        assert_eq!(holds.count, HOLDS);
        assert_eq!(holds.live_from, producer.data_tail, "every lent span is listed");
        for (i, &(start, end)) in holds.spans[..holds.count].iter().enumerate() {
            let first = if i == 0 { 1 } else { 0 };
            assert_eq!(end - start, (2 - first) * 128, "range {i}: the two kept spans, one after the other");
        }
        drop(kept);

        // Bytes: past three quarters of the ring, a frame is copied out
        // while others are lent, and lent when it is alone.
        let (_heap, mut producer, mut consumer) = fresh(256, 64 * 1024);
        let big = |producer: &mut Producer, consumer: &mut Consumer, len: u64| {
            let at = producer.reserve(len).unwrap();
            producer.publish(Some(at));
            let Some(Received::Frame { span, .. }) = poll_copy(consumer).unwrap() else { panic!("{len} bytes") };
            span
        };
        let alone = big(&mut producer, &mut consumer, 56 * 1024);
        assert!(!consumer.should_copy_out(1), "one frame alone is lent, however large");
        drop(alone);
        let first = big(&mut producer, &mut consumer, 40 * 1024);
        let second = big(&mut producer, &mut consumer, 8 * 1024);
        assert!(!consumer.should_copy_out(1), "48 KiB of 64 KiB lent");
        let third = big(&mut producer, &mut consumer, 4 * 1024);
        assert!(consumer.should_copy_out(1), "52 KiB of 64 KiB lent");
        drop((first, second, third));
    }

    /// A producer keeping to a prefix goes back to the first pages once its
    /// tail is past it, whenever the span fits before the oldest live
    /// byte: a consumer keeping the last four spans sees them all within
    /// the prefix, where without it they cycle through the whole ring.
    /// Nothing kept is overwritten.
    #[test]
    fn spans_keep_to_the_prefix_around_a_rolling_window() {
        // 64 spans a lap; enough rounds for more than one.
        let rounds: u64 = if cfg!(miri) { 100 } else { 300 };
        for (prefix, furthest) in [(4 << 10, 4 << 10), (16 << 10, 16 << 10)] {
            let (_heap, producer, mut consumer) = fresh(16, 16 << 10);
            let mut producer = producer.keeping_to(prefix);
            let mut window: VecDeque<(usize, usize, u8, LentSpan)> = VecDeque::new();
            let mut reached = 0;
            for i in 0..rounds {
                assert!(producer.has_slot());
                let at = producer.reserve(256).unwrap();
                write_span(&producer, at, i as u8);
                producer.publish(Some(at));
                let Some(Received::Frame { offset, len, span }) = poll_copy(&mut consumer).unwrap() else {
                    panic!("span {i}")
                };
                reached = reached.max(offset + len);
                window.push_back((offset, len, i as u8, span));
                if window.len() > 4 {
                    window.pop_front();
                }
                for (offset, len, fill, _) in &window {
                    assert!(read_span(&consumer, *offset, *len).iter().all(|b| b == fill), "kept {fill} overwritten");
                }
            }
            assert_eq!(reached, furthest, "prefix {prefix}");
        }
    }

    /// A consumer that keeps some spans for long while releasing the rest
    /// at once: the producer keeps placing frames between the kept ones,
    /// and no kept span is ever overwritten.
    #[test]
    fn frames_flow_around_spans_kept_for_long() {
        let rounds: u64 = if cfg!(miri) { 80 } else { 20_000 };
        let (_heap, mut producer, mut consumer) = fresh(8, 2048);
        let kept_for = 40u64;
        std::thread::scope(|scope| {
            scope.spawn(move || {
                for i in 0..rounds {
                    let len = 64 * (1 + i % 3);
                    let at = loop {
                        if producer.has_slot() {
                            if let Some(at) = producer.reserve(len) {
                                break at;
                            }
                        }
                        std::thread::yield_now();
                    };
                    write_span(&producer, at, i as u8);
                    producer.publish(Some(at));
                }
            });
            let mut kept: VecDeque<(u64, usize, usize, LentSpan)> = VecDeque::new();
            let mut seen = 0u64;
            let mut around = 0u64;
            while seen < rounds {
                match poll_copy(&mut consumer).unwrap() {
                    Some(Received::Frame { offset, len, span }) => {
                        assert_eq!(len as u64, 64 * (1 + seen % 3));
                        assert!(read_span(&consumer, offset, len).iter().all(|&b| b == seen as u8));
                        if seen % 16 == 0 {
                            kept.push_back((seen, offset, len, span));
                        } else {
                            around += u64::from(!kept.is_empty());
                            drop(span);
                        }
                        seen += 1;
                        while kept.front().is_some_and(|k| k.0 + kept_for <= seen) {
                            let (i, offset, len, span) = kept.pop_front().unwrap();
                            assert!(read_span(&consumer, offset, len).iter().all(|&b| b == i as u8), "kept {i}");
                            drop(span);
                        }
                    }
                    Some(_) => panic!("only spans sent"),
                    None => std::thread::yield_now(),
                }
            }
            assert!(around > rounds / 2, "frames crossed while a span was kept: {around}");
        });
    }

    fn publish_split_with_head(producer: &mut Producer, held: &Arc<HeldSpan>, head: u8) -> bool {
        publish_spans_with_head(producer, std::slice::from_ref(held), head)
    }

    fn publish_spans_with_head(producer: &mut Producer, helds: &[Arc<HeldSpan>], head: u8) -> bool {
        assert!(producer.has_slots(helds.len() as u64));
        // SAFETY: free slots' inline bytes are the producer's.
        unsafe { std::ptr::write_bytes(producer.split_head_bytes(helds.len()), head, 64) };
        publish_held(producer, helds, 64)
    }

    /// A split frame over held spans only.
    fn publish_held(producer: &mut Producer, helds: &[Arc<HeldSpan>], head_len: usize) -> bool {
        let parts: Vec<SplitPart> = helds.iter().cloned().map(SplitPart::Held).collect();
        producer.publish_split_parts(&parts, HeadAt::Slot(head_len))
    }

    /// The one span of a split frame.
    fn only(mut spans: Vec<SplitSpan>) -> (usize, usize, LentSpan) {
        assert_eq!(spans.len(), 1);
        let SplitSpan { offset, len, span } = spans.pop().unwrap();
        (offset, len, span)
    }

    fn overlaps(a: Reservation, b: Reservation, capacity: u64) -> bool {
        let (a0, b0) = (a.position % capacity, b.position % capacity);
        a0 < b0 + b.len && b0 < a0 + a.len
    }

    /// A span held for a kernel's output while later frames go out: they
    /// flow on around it, nothing is placed over it, and it crosses behind
    /// them as a split frame with its bytes intact.
    #[test]
    fn a_held_span_crosses_behind_later_frames_untouched() {
        let (_heap, mut producer, mut consumer) = fresh(8, 1024);
        let held = producer.reserve_held(256).unwrap();
        let h = held.reservation();
        write_span(&producer, h, 7);
        for round in 0..12u8 {
            let at = producer.reserve(192).expect("room around the held span");
            assert!(!overlaps(at, h, 1024), "round {round}: {at:?} over the held {h:?}");
            write_span(&producer, at, round);
            assert!(producer.has_slot());
            producer.publish(Some(at));
            let Some(Received::Frame { offset, len, span }) = poll_copy(&mut consumer).unwrap() else { panic!() };
            assert_eq!(read_span(&consumer, offset, len), vec![round; 192]);
            drop(span);
        }
        assert_eq!(read_span(&consumer, (h.position % 1024) as usize, 256), vec![7; 256]);
        assert!(!producer.is_drained(), "a held span is not free");
        assert!(publish_split_with_head(&mut producer, &held, 0x5a));
        assert!(!publish_held(&mut producer, std::slice::from_ref(&held), 64), "published once only");
        let Some(Received::Split { head, spans }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        let (offset, len, span) = only(spans);
        assert_eq!(head.bytes(), &[0x5a; 64][..]);
        assert_eq!((offset as u64, len), (h.position % 1024, 256));
        assert_eq!(read_span(&consumer, offset, len), vec![7; 256]);
        // Taken behind the frames before it: the consumer's head moved back
        // to it, so this side's producer places nothing over it, held here
        // or not.
        held.done_here();
        for _ in 0..6 {
            let at = producer.reserve(192).expect("room");
            assert!(!overlaps(at, h, 1024));
            assert!(producer.has_slot());
            producer.publish(Some(at));
            let Some(Received::Frame { span, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
            drop(span);
        }
        assert_eq!(read_span(&consumer, offset, len), vec![7; 256], "lent, intact");
        drop(span);
        assert!(producer.is_drained());
    }

    /// A span held at the first pages while the consumer has released
    /// everything: the spans after it may use the rest of the ring, past
    /// where the last lap ended, while it is held; a consumer that still
    /// holds a span bounds them by its head as before.
    #[test]
    fn a_span_held_at_the_first_pages_leaves_the_rest_of_the_ring() {
        const K: u64 = 1024;
        let (_heap, mut producer, mut consumer) = fresh(8, 1024 * K);
        let at = producer.reserve(640 * K).unwrap();
        producer.publish(Some(at));
        let Some(Received::Frame { span, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        drop(span);
        let first = producer.reserve_held(256 * K).unwrap();
        assert_eq!(first.reservation().position, 1024 * K, "back at the first pages");
        write_span(&producer, first.reservation(), 1);
        // Ends past 640 KiB a lap on, where the last lap ended.
        let second = producer.reserve_held(512 * K).expect("room past the last lap's end");
        assert_eq!(second.reservation().position, 1280 * K);
        write_span(&producer, second.reservation(), 2);
        assert!(producer.reserve(320 * K).is_none(), "both held: 256 KiB free");
        let small = producer.reserve(256 * K).expect("the rest of the lap");
        write_span(&producer, small, 3);
        producer.publish(Some(small));
        let Some(Received::Frame { offset, len, span }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        assert_eq!((offset as u64, len as u64), (768 * K, 256 * K));
        drop(span);
        assert!(publish_spans_with_head(&mut producer, &[first.clone(), second.clone()], 9));
        let Some(Received::Split { spans, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        let got: Vec<(u64, u64, bool)> = spans
            .iter()
            .map(|s| {
                let fill = if s.offset == 0 { 1 } else { 2 };
                (s.offset as u64, s.len as u64, read_span(&consumer, s.offset, s.len).iter().all(|&b| b == fill))
            })
            .collect();
        assert_eq!(got, vec![(0, 256 * K, true), (256 * K, 512 * K, true)]);
        first.done_here();
        second.done_here();
        drop(spans);

        // The consumer keeps a span: a span held after it leaves the others
        // only what lies within a lap of the kept one.
        let at = producer.reserve(640 * K).unwrap();
        assert_eq!(at.position % (1024 * K), 0, "back at the first pages");
        producer.publish(Some(at));
        let Some(Received::Frame { span: kept, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        let small = producer.reserve(64 * K).unwrap();
        producer.publish(Some(small));
        let Some(Received::Frame { span, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        drop(span);
        let held = producer.reserve_held(256 * K).unwrap();
        assert_eq!(held.reservation().position % (1024 * K), 704 * K, "nothing free before the kept span");
        assert!(producer.reserve(128 * K).is_none(), "the kept span bounds what follows");
        drop(kept);
        held.done_here();
    }

    /// This side still reads a span the consumer has released: it stays
    /// held until this side is done too; one dropped unpublished frees its
    /// bytes.
    #[test]
    fn a_held_span_is_free_once_both_sides_are_done() {
        let (_heap, mut producer, mut consumer) = fresh(8, 512);
        let held = producer.reserve_held(256).unwrap();
        assert!(publish_split_with_head(&mut producer, &held, 1));
        let Some(Received::Split { spans, .. }) = poll_copy(&mut consumer).unwrap() else { panic!() };
        drop(spans);
        // Offsets a stream of 256-byte frames lands on.
        let mut stream = |producer: &mut Producer, rounds: usize| -> Vec<u64> {
            (0..rounds)
                .map(|_| {
                    let at = producer.reserve(256).expect("room");
                    assert!(producer.has_slot());
                    producer.publish(Some(at));
                    let Some(Received::Frame { offset, span, .. }) = poll_copy(&mut consumer).unwrap() else {
                        panic!()
                    };
                    drop(span);
                    offset as u64
                })
                .collect()
        };
        let h = held.reservation().position % 512;
        assert!(stream(&mut producer, 4).iter().all(|&o| o != h), "this side still reads the held span");
        held.done_here();
        assert!(stream(&mut producer, 4).contains(&h), "both sides done: its bytes are used again");

        let unpublished = producer.reserve_held(256).unwrap();
        let h = unpublished.reservation().position % 512;
        assert!(stream(&mut producer, 4).iter().all(|&o| o != h));
        unpublished.done_here();
        assert!(stream(&mut producer, 4).contains(&h), "a held span dropped unpublished frees its bytes");
    }

    #[test]
    fn at_most_max_held_spans_are_held() {
        let mut heap = HeapRing::new(8, 64 * 64);
        // SAFETY: fresh ring memory, one producer.
        let mut producer = unsafe { Producer::new(heap.memory()) };
        let held: Vec<_> = (0..MAX_HELD).map(|_| producer.reserve_held(64).unwrap()).collect();
        assert!(producer.reserve_held(64).is_none());
        held[3].done_here();
        assert!(producer.reserve_held(64).is_some(), "one done unpublished makes room");
    }

    #[test]
    fn a_split_frame_a_lap_behind_is_refused() {
        let split = |position, len, head| Descriptor { kind: DESC_SPLIT, position, len, reserved2: head, reserved: 0 };
        // A lap or more behind the furthest span taken.
        let mut heap = HeapRing::new(4, 512);
        heap.set_slot(0, Descriptor { kind: DESC_FRAME, position: 448, len: 64, ..Default::default() });
        heap.set_slot(1, split(0, 64, 64));
        // SAFETY: fresh ring memory, one consumer.
        let mut consumer = unsafe { Consumer::new(heap.memory()) };
        let _first = poll_copy(&mut consumer).unwrap();
        assert!(matches!(poll_copy(&mut consumer).unwrap_err(), RingError::OutOfSequence { .. }));
    }

    /// Two threads: every third frame's span is held first, filled, and
    /// published after the two frames that follow it; every frame arrives
    /// intact in publish order while the consumer keeps a few for a while.
    #[test]
    fn two_threads_with_held_spans_never_share_a_span() {
        // The whole ring, and spans kept to its first quarter.
        for prefix in [4096, 1024] {
            two_threads_with_held_spans_never_share_a_span_keeping_to(prefix);
        }
    }

    fn two_threads_with_held_spans_never_share_a_span_keeping_to(prefix: u64) {
        let rounds: u64 = if cfg!(miri) { 45 } else { 15_000 };
        let (_heap, producer, mut consumer) = fresh(8, 4096);
        let mut producer = producer.keeping_to(prefix);
        let len_of = |i: u64| 64 * (1 + i % 4);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let wait_room = |producer: &mut Producer, len: u64, held: bool| loop {
                    if producer.has_slot() {
                        if held {
                            if let Some(h) = producer.reserve_held(len) {
                                break (Some(h), None);
                            }
                        } else if let Some(at) = producer.reserve(len) {
                            break (None, Some(at));
                        }
                    }
                    std::thread::yield_now();
                };
                let mut i = 0;
                while i + 3 <= rounds {
                    // Frame i+2 (in publish order) is held first.
                    let (held, _) = wait_room(&mut producer, len_of(i + 2), true);
                    let held = held.unwrap();
                    write_span(&producer, held.reservation(), (i + 2) as u8);
                    for j in i..i + 2 {
                        let (_, at) = wait_room(&mut producer, len_of(j), false);
                        let at = at.unwrap();
                        write_span(&producer, at, j as u8);
                        assert!(producer.has_slot());
                        producer.publish(Some(at));
                    }
                    while !producer.has_slot() {
                        std::thread::yield_now();
                    }
                    assert!(publish_split_with_head(&mut producer, &held, 0xee));
                    held.done_here();
                    i += 3;
                }
            });
            let mut kept: VecDeque<(usize, usize, u8, LentSpan)> = VecDeque::new();
            let mut seen = 0u64;
            while seen + 3 <= rounds {
                let (offset, len, span) = match poll_copy(&mut consumer).unwrap() {
                    Some(Received::Frame { offset, len, span }) => (offset, len, span),
                    Some(Received::Split { head, spans }) => {
                        assert_eq!(seen % 3, 2, "frame {seen} was not held");
                        assert_eq!(head.bytes(), &[0xee; 64][..]);
                        only(spans)
                    }
                    Some(other) => panic!("unexpected {other:?}"),
                    None => {
                        std::thread::yield_now();
                        continue;
                    }
                };
                assert_eq!(len as u64, len_of(seen));
                assert!(read_span(&consumer, offset, len).iter().all(|&b| b == seen as u8), "frame {seen}");
                kept.push_back((offset, len, seen as u8, span));
                seen += 1;
                if kept.len() > 3 {
                    let (offset, len, fill, span) = kept.pop_front().unwrap();
                    assert!(read_span(&consumer, offset, len).iter().all(|&b| b == fill), "kept {fill}");
                    drop(span);
                }
            }
        });
    }

    /// A hostile consumer publishing holds off the 64-byte grid cannot
    /// make the producer place a span off it (a kernel writes a held span
    /// with aligned stores).
    #[test]
    fn spans_stay_aligned_whatever_holds_a_consumer_publishes() {
        let mut heap = HeapRing::new(8, 512);
        let memory = heap.memory();
        // SAFETY: fresh ring memory, one producer.
        let mut producer = unsafe { Producer::new(memory) };
        let at = producer.reserve(448).unwrap();
        assert!(producer.has_slot());
        producer.publish(Some(at));
        let holds = &memory.control().holds;
        holds.count.store(1, Ordering::Relaxed);
        holds.live_from.store(512, Ordering::Relaxed);
        holds.spans[0].store(515, Ordering::Relaxed);
        holds.spans[1].store(530, Ordering::Relaxed);
        holds.version.store(2, Ordering::Release);
        let placed = producer.reserve(128).expect("room past the garbage hold");
        assert_eq!(placed.position, 576, "just past the hold, widened to 64 bytes");
        let held = producer.reserve_held(64).expect("room for a held span");
        assert_eq!(held.reservation().position % SPAN_ALIGN, 0);
    }
}
