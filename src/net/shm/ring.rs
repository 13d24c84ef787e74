//! The index protocol of one direction of a shared-memory channel: a ring
//! of fixed descriptor slots and a data ring of frame bytes, each with a
//! producer index and a consumer index in shared memory.
//!
//! Owns: who may write which index and which bytes, and the checks that
//! keep a hostile producer from making the consumer read outside the data
//! ring. Must not know what a frame is (the channel above decodes the
//! bytes), how to sleep (the doorbell), or where the memory comes from (the
//! region): it works on raw pointers it is given, so the same code runs
//! over a heap block under Miri.
//!
//! Ownership, per direction:
//! - The producer alone writes `desc_tail`, the descriptor slots in
//!   `[desc_head, desc_tail)`'s complement, and data bytes in
//!   `[data_tail, data_head + capacity)`. It publishes a descriptor by
//!   writing the slot, then storing `desc_tail` with `Release`.
//! - The consumer alone writes `desc_head` (a slot is free again as soon as
//!   the consumer has copied it out, before the frame is even decoded) and
//!   `data_head` (data is free again only when every span before it has been
//!   released: a received tensor borrows its span until it drops).
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
//! Trust: a descriptor is copied out of shared memory before it is checked,
//! and a span is handed out only when it lies wholly inside the data ring,
//! starts where the previous one ended (or at the start of a later lap less
//! than a lap away), and does not overlap a span still lent. A producer that
//! breaks a rule is a protocol error; it can never make the consumer read
//! outside the ring.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// Bytes every span's start and length are multiples of (frames are).
pub const SPAN_ALIGN: u64 = 64;

/// Spans at least this large read the consumer's head before placing.
const FRESH_HEAD_MIN_BYTES: u64 = 64 << 10;

/// What a descriptor announces.
pub const DESC_FRAME: u32 = 1;
/// "The next frame comes over the socket": sent when a frame does not fit
/// the data ring, so that frames stay in order across both paths.
pub const DESC_VIA_SOCKET: u32 = 2;

/// The producer's cache line.
#[repr(C, align(64))]
pub struct ProducerLine {
    pub desc_tail: AtomicU64,
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

/// One direction's indices, each party's on its own cache line.
#[repr(C)]
pub struct RingControl {
    pub producer: ProducerLine,
    pub consumer: ConsumerLine,
    pub doorbell: DoorbellLine,
}

const _: () = assert!(std::mem::size_of::<RingControl>() == 192);

/// A descriptor slot as laid out in shared memory.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Descriptor {
    pub kind: u32,
    pub reserved: u32,
    pub position: u64,
    pub len: u64,
    pub reserved2: u64,
}

pub const DESCRIPTOR_BYTES: usize = std::mem::size_of::<Descriptor>();
const _: () = assert!(DESCRIPTOR_BYTES == 32);

/// Where one direction lives. The memory must stay mapped while any
/// producer, consumer or lent span refers to it (the region's `Arc`).
#[derive(Clone, Copy, Debug)]
pub struct RingMemory {
    pub control: *const RingControl,
    pub descriptors: *mut Descriptor,
    /// A power of two.
    pub slots: u64,
    pub data: *mut u8,
    /// A multiple of [`SPAN_ALIGN`].
    pub capacity: u64,
}

// SAFETY: plain addresses of shared memory; every access goes through the
// protocol above (atomics for indices, disjoint byte ranges for data).
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
}

/// Why a consumer refused what a producer published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("descriptor index {tail} is {ahead} ahead of {head} in a ring of {slots} slots")]
    IndexOutOfRange { head: u64, tail: u64, ahead: u64, slots: u64 },
    #[error("descriptor {index} has unknown kind {kind}")]
    UnknownKind { index: u64, kind: u32 },
    #[error("descriptor {index}: span {position}+{len} is not 64-byte aligned or is empty")]
    Misaligned { index: u64, position: u64, len: u64 },
    #[error("descriptor {index}: span {position}+{len} does not lie inside the {capacity}-byte data ring")]
    OutsideRing { index: u64, position: u64, len: u64, capacity: u64 },
    #[error("descriptor {index}: span at {position} does not follow the previous one (at {expected})")]
    OutOfSequence { index: u64, position: u64, expected: u64 },
    #[error("descriptor {index}: span {position}+{len} overlaps bytes still lent (released up to {released})")]
    Overlap { index: u64, position: u64, len: u64, released: u64 },
}

/// What the consumer took from the ring.
#[derive(Debug)]
pub enum Received {
    /// `len` bytes at `offset` in the data ring, lent until `span` drops.
    Frame { offset: usize, len: usize, span: LentSpan },
    /// The next frame is on the socket.
    ViaSocket,
}

/// The producer end. One sender at a time (the connection's send lock).
pub struct Producer {
    memory: RingMemory,
    desc_tail: u64,
    data_tail: u64,
    cached_desc_head: u64,
    cached_data_head: u64,
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
    /// says, whose producer end nobody else drives.
    pub unsafe fn new(memory: RingMemory) -> Producer {
        let control = memory.control();
        let desc_tail = control.producer.desc_tail.load(Ordering::Acquire);
        let data_head = control.consumer.data_head.load(Ordering::Acquire);
        Producer {
            memory,
            desc_tail,
            data_tail: data_head,
            cached_desc_head: control.consumer.desc_head.load(Ordering::Acquire),
            cached_data_head: data_head,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.memory.capacity
    }

    /// Whether a descriptor slot is free.
    pub fn has_slot(&mut self) -> bool {
        if self.desc_tail - self.cached_desc_head < self.memory.slots {
            return true;
        }
        self.cached_desc_head = self.memory.control().consumer.desc_head.load(Ordering::Acquire);
        self.desc_tail.wrapping_sub(self.cached_desc_head) < self.memory.slots
    }

    /// A span of `len` bytes (a multiple of 64, at most the capacity) the
    /// consumer has released, or `None` while there is none.
    pub fn reserve(&mut self, len: u64) -> Option<Reservation> {
        debug_assert!(len > 0 && len % SPAN_ALIGN == 0 && len <= self.memory.capacity);
        if len >= FRESH_HEAD_MIN_BYTES || self.data_tail % self.memory.capacity >= FRESH_HEAD_MIN_BYTES {
            // Worth a look at the consumer's line: a span placed while the
            // ring is in fact empty goes back to the first pages, which are
            // resident, instead of faulting in new ones. Small frames past
            // the first 64 KiB look too, so a request/response stream keeps
            // to those pages and a connection's memory stays flat.
            self.cached_data_head = self.memory.control().consumer.data_head.load(Ordering::Acquire);
        }
        if let Some(at) = self.place(len) {
            return Some(at);
        }
        self.cached_data_head = self.memory.control().consumer.data_head.load(Ordering::Acquire);
        self.place(len)
    }

    fn place(&self, len: u64) -> Option<Reservation> {
        let capacity = self.memory.capacity;
        let offset = self.data_tail % capacity;
        let next_lap = self.data_tail + (capacity - offset);
        // Checked: a consumer that stored a head past our tail gets no room,
        // not an overflow.
        let fits = |position: u64| {
            position
                .checked_add(len)
                .and_then(|end| end.checked_sub(self.cached_data_head))
                .is_some_and(|n| n <= capacity)
        };
        // Next lap when the rest of this one is too short, or when the ring
        // is empty and the span fits before the current offset (back to the
        // first pages).
        let empty_and_fits_first_pages = offset != 0 && self.cached_data_head == self.data_tail && len <= offset;
        let position = if empty_and_fits_first_pages || offset + len > capacity { next_lap } else { self.data_tail };
        fits(position).then_some(Reservation { position, len })
    }

    /// The bytes of a reservation, for the caller to fill.
    pub fn bytes(&self, at: Reservation) -> *mut u8 {
        // The offset plus length lies inside the ring (checked by `place`).
        self.memory.data.wrapping_add((at.position % self.memory.capacity) as usize)
    }

    /// Publishes a filled reservation (or, with `None`, a via-socket
    /// marker). The caller checked [`has_slot`](Self::has_slot).
    pub fn publish(&mut self, at: Option<Reservation>) {
        let (kind, position, len) = match at {
            Some(at) => (DESC_FRAME, at.position, at.len),
            None => (DESC_VIA_SOCKET, self.data_tail, 0),
        };
        let slot = (self.desc_tail & (self.memory.slots - 1)) as usize;
        let descriptor = Descriptor { kind, reserved: 0, position, len, reserved2: 0 };
        // SAFETY: the slot index is below `slots`, and the slot is free: the
        // consumer released it (`has_slot`) and reads it only after the
        // `Release` store below.
        unsafe { std::ptr::write_volatile(self.memory.descriptors.add(slot), descriptor) };
        self.desc_tail += 1;
        if let Some(at) = at {
            self.data_tail = at.position + at.len;
        }
        self.memory.control().producer.desc_tail.store(self.desc_tail, Ordering::Release);
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
        let head = self.consumer_data_head();
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
        self.consumer_data_head() == self.data_tail
    }
}

/// Out-of-order releases, folded into the in-order `data_head`.
struct Releases {
    memory: RingMemory,
    /// Spans handed out (or skipped), oldest first: end position and
    /// whether released.
    spans: VecDeque<(u64, bool)>,
    released: u64,
}

impl Releases {
    fn release(&mut self, end: u64) {
        if let Ok(at) = self.spans.binary_search_by_key(&end, |&(e, _)| e) {
            self.spans[at].1 = true;
        }
        let mut advanced = false;
        while let Some(&(end, true)) = self.spans.front() {
            self.released = end;
            self.spans.pop_front();
            advanced = true;
        }
        if advanced {
            self.memory.control().consumer.data_head.store(self.released, Ordering::Release);
        }
    }
}

/// A span of the data ring lent to whatever reads it; released on drop.
/// Holds `keep` (the mapping) so the memory outlives the ring's handles.
pub struct LentSpan {
    end: u64,
    releases: Arc<Mutex<Releases>>,
    keep: Option<Arc<dyn Send + Sync>>,
}

impl std::fmt::Debug for LentSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LentSpan(..{})", self.end)
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
        self.releases.lock().release(self.end);
        // `keep` drops after the release is stored: the store is to the
        // mapping it keeps alive.
        drop(self.keep.take());
    }
}

/// The consumer end. One reader at a time (the connection's reader).
pub struct Consumer {
    memory: RingMemory,
    desc_head: u64,
    cached_desc_tail: u64,
    /// Where the next span must start (or a later lap's start).
    expected: u64,
    releases: Arc<Mutex<Releases>>,
}

impl Consumer {
    /// # Safety
    /// As [`Producer::new`], for the consumer end.
    pub unsafe fn new(memory: RingMemory) -> Consumer {
        let control = memory.control();
        let desc_head = control.consumer.desc_head.load(Ordering::Acquire);
        let data_head = control.consumer.data_head.load(Ordering::Acquire);
        Consumer {
            memory,
            desc_head,
            cached_desc_tail: desc_head,
            expected: data_head,
            releases: Arc::new(Mutex::new(Releases { memory, spans: VecDeque::new(), released: data_head })),
        }
    }

    /// Whether a descriptor is waiting (an `Acquire` load when the cached
    /// tail says none).
    pub fn has_pending(&mut self) -> bool {
        if self.cached_desc_tail != self.desc_head {
            return true;
        }
        self.cached_desc_tail = self.memory.control().producer.desc_tail.load(Ordering::Acquire);
        self.cached_desc_tail != self.desc_head
    }

    /// Takes the next descriptor, checked, or `None` when there is none.
    pub fn poll(&mut self) -> Result<Option<Received>, RingError> {
        if !self.has_pending() {
            return Ok(None);
        }
        let index = self.desc_head;
        let ahead = self.cached_desc_tail.wrapping_sub(self.desc_head);
        if ahead > self.memory.slots {
            return Err(RingError::IndexOutOfRange {
                head: self.desc_head,
                tail: self.cached_desc_tail,
                ahead,
                slots: self.memory.slots,
            });
        }
        let slot = (index & (self.memory.slots - 1)) as usize;
        // SAFETY: the slot index is below `slots`; the `Acquire` load of
        // `desc_tail` in `has_pending` made the producer's write of it
        // visible. It is copied out before anything is checked, so a
        // producer writing it again cannot change what was checked.
        let descriptor = unsafe { std::ptr::read_volatile(self.memory.descriptors.add(slot)) };
        self.desc_head += 1;
        self.memory.control().consumer.desc_head.store(self.desc_head, Ordering::Release);
        match descriptor.kind {
            DESC_VIA_SOCKET => Ok(Some(Received::ViaSocket)),
            DESC_FRAME => self.take_span(index, descriptor.position, descriptor.len).map(Some),
            kind => Err(RingError::UnknownKind { index, kind }),
        }
    }

    fn take_span(&mut self, index: u64, position: u64, len: u64) -> Result<Received, RingError> {
        let capacity = self.memory.capacity;
        if len == 0 || len % SPAN_ALIGN != 0 || position % SPAN_ALIGN != 0 {
            return Err(RingError::Misaligned { index, position, len });
        }
        let offset = position % capacity;
        if len > capacity || offset + len > capacity {
            return Err(RingError::OutsideRing { index, position, len, capacity });
        }
        let in_sequence = position == self.expected
            || (offset == 0 && position > self.expected && position - self.expected < capacity);
        if !in_sequence {
            return Err(RingError::OutOfSequence { index, position, expected: self.expected });
        }
        let end = position + len;
        let mut releases = self.releases.lock();
        if end - releases.released > capacity {
            return Err(RingError::Overlap { index, position, len, released: releases.released });
        }
        if position > self.expected {
            releases.spans.push_back((position, true)); // the skipped rest of the lap
        }
        releases.spans.push_back((end, false));
        drop(releases);
        self.expected = end;
        Ok(Received::Frame {
            offset: offset as usize,
            len: len as usize,
            span: LentSpan { end, releases: self.releases.clone(), keep: None },
        })
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
        pub descriptors: Vec<Descriptor>,
        pub data: Vec<Block>,
    }

    impl HeapRing {
        pub fn new(slots: u64, capacity: u64) -> Box<HeapRing> {
            Box::new(HeapRing {
                control: Box::new(RingControl {
                    producer: ProducerLine { desc_tail: AtomicU64::new(0) },
                    consumer: ConsumerLine { desc_head: AtomicU64::new(0), data_head: AtomicU64::new(0) },
                    doorbell: DoorbellLine { seq: AtomicU32::new(0), sleeping: AtomicU32::new(0) },
                }),
                descriptors: vec![Descriptor::default(); slots as usize],
                data: (0..capacity / 64).map(|_| Block([0; 64])).collect(),
            })
        }

        pub fn memory(&mut self) -> RingMemory {
            RingMemory {
                control: &*self.control,
                descriptors: self.descriptors.as_mut_ptr(),
                slots: self.descriptors.len() as u64,
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

    fn write_span(producer: &Producer, at: Reservation, fill: u8) {
        // SAFETY: a reservation's bytes are the producer's until published.
        unsafe { std::ptr::write_bytes(producer.bytes(at), fill, at.len as usize) };
    }

    fn read_span(consumer: &Consumer, offset: usize, len: usize) -> Vec<u8> {
        // SAFETY: a lent span lies inside the ring and is not written while
        // lent.
        unsafe { std::slice::from_raw_parts(consumer.bytes(offset), len).to_vec() }
    }

    #[test]
    fn free_ranges_are_the_bytes_no_live_span_holds() {
        let mut heap = HeapRing::new(4, 512);
        let memory = heap.memory();
        // SAFETY: fresh ring memory, one producer and one consumer.
        let (mut producer, mut consumer) = unsafe { (Producer::new(memory), Consumer::new(memory)) };
        assert_eq!(producer.free_ranges(), [(0, 512), (0, 0)]);
        assert!(producer.is_drained());
        let a = producer.reserve(192).unwrap();
        producer.publish(Some(a));
        assert_eq!(producer.free_ranges(), [(192, 512), (0, 0)], "published, not yet released");
        let b = producer.reserve(192).unwrap();
        producer.publish(Some(b));
        let Some(Received::Frame { span: span_a, .. }) = consumer.poll().unwrap() else { panic!() };
        let Some(Received::Frame { span: span_b, .. }) = consumer.poll().unwrap() else { panic!() };
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
    fn spans_cross_in_order_and_space_returns_only_in_order() {
        let mut heap = HeapRing::new(4, 512);
        let memory = heap.memory();
        // SAFETY: fresh ring memory, one producer and one consumer.
        let (mut producer, mut consumer) = unsafe { (Producer::new(memory), Consumer::new(memory)) };
        let a = producer.reserve(192).unwrap();
        write_span(&producer, a, 1);
        producer.publish(Some(a));
        let b = producer.reserve(192).unwrap();
        write_span(&producer, b, 2);
        producer.publish(Some(b));
        assert!(producer.reserve(192).is_none(), "only 128 bytes left");
        let Some(Received::Frame { offset, len, span: span_a }) = consumer.poll().unwrap() else { panic!() };
        assert_eq!(read_span(&consumer, offset, len), vec![1; 192]);
        let Some(Received::Frame { offset, len, span: span_b }) = consumer.poll().unwrap() else { panic!() };
        assert_eq!(read_span(&consumer, offset, len), vec![2; 192]);
        drop(span_b);
        assert!(producer.reserve(192).is_none(), "b released before a: nothing returns yet");
        drop(span_a);
        // Everything released and the ring empty: back to offset 0.
        let c = producer.reserve(320).unwrap();
        assert_eq!(c.position % 512, 0);
        assert_eq!(c.position, 512);
        producer.publish(Some(c));
        producer.publish(None);
        let Some(Received::Frame { offset, .. }) = consumer.poll().unwrap() else { panic!() };
        assert_eq!(offset, 0);
        assert!(matches!(consumer.poll().unwrap(), Some(Received::ViaSocket)));
        assert!(consumer.poll().unwrap().is_none());
    }

    #[test]
    fn descriptor_slots_bound_what_is_in_flight() {
        let mut heap = HeapRing::new(2, 4096);
        let memory = heap.memory();
        // SAFETY: fresh ring memory, one producer and one consumer.
        let (mut producer, mut consumer) = unsafe { (Producer::new(memory), Consumer::new(memory)) };
        assert!(producer.has_slot());
        producer.publish(None);
        producer.publish(None);
        assert!(!producer.has_slot());
        consumer.poll().unwrap();
        assert!(producer.has_slot());
    }

    /// A hostile producer: every field of a descriptor and the tail index
    /// garbage; each is refused and nothing is read.
    #[test]
    fn garbage_descriptors_are_refused() {
        type Case = (u64, Descriptor, fn(&RingError) -> bool);
        let cases: [Case; 6] = [
            (1, Descriptor { kind: 9, ..Default::default() }, |e| matches!(e, RingError::UnknownKind { .. })),
            (1, Descriptor { kind: DESC_FRAME, position: 0, len: 100, ..Default::default() }, |e| {
                matches!(e, RingError::Misaligned { .. })
            }),
            (1, Descriptor { kind: DESC_FRAME, position: 448, len: 128, ..Default::default() }, |e| {
                matches!(e, RingError::OutsideRing { .. })
            }),
            (1, Descriptor { kind: DESC_FRAME, position: 0, len: 1 << 40, ..Default::default() }, |e| {
                matches!(e, RingError::OutsideRing { .. })
            }),
            (1, Descriptor { kind: DESC_FRAME, position: 64, len: 64, ..Default::default() }, |e| {
                matches!(e, RingError::OutOfSequence { .. })
            }),
            (u64::MAX - 3, Descriptor { kind: DESC_FRAME, position: 0, len: 64, ..Default::default() }, |e| {
                matches!(e, RingError::IndexOutOfRange { .. })
            }),
        ];
        for (tail, descriptor, expected) in cases {
            let mut heap = HeapRing::new(4, 512);
            heap.descriptors[0] = descriptor;
            heap.control.producer.desc_tail.store(tail, Ordering::Release);
            // SAFETY: fresh ring memory, one consumer.
            let mut consumer = unsafe { Consumer::new(heap.memory()) };
            let err = consumer.poll().unwrap_err();
            assert!(expected(&err), "{descriptor:?}: {err}");
        }
        // A span overlapping one still lent.
        let mut heap = HeapRing::new(4, 512);
        heap.descriptors[0] = Descriptor { kind: DESC_FRAME, position: 0, len: 256, ..Default::default() };
        heap.descriptors[1] = Descriptor { kind: DESC_FRAME, position: 512, len: 256, ..Default::default() };
        heap.control.producer.desc_tail.store(2, Ordering::Release);
        // SAFETY: fresh ring memory, one consumer.
        let mut consumer = unsafe { Consumer::new(heap.memory()) };
        let _lent = consumer.poll().unwrap();
        assert!(matches!(consumer.poll().unwrap_err(), RingError::Overlap { .. }));
    }

    /// Producer and consumer on two threads: every span arrives whole and
    /// in order, and the producer never overwrites a span still lent (each
    /// is checked after a delay, while the producer keeps writing).
    #[test]
    fn two_threads_never_share_a_span() {
        let rounds: u64 = if cfg!(miri) { 60 } else { 20_000 };
        let mut heap = HeapRing::new(8, 1024);
        let memory = heap.memory();
        // SAFETY: fresh ring memory, one producer and one consumer.
        let (mut producer, mut consumer) = unsafe { (Producer::new(memory), Consumer::new(memory)) };
        std::thread::scope(|scope| {
            scope.spawn(move || {
                for i in 0..rounds {
                    let len = 64 * (1 + i % 5);
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
            let mut held: VecDeque<(usize, usize, u8, LentSpan)> = VecDeque::new();
            let mut seen = 0u64;
            while seen < rounds {
                match consumer.poll().unwrap() {
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
                    Some(Received::ViaSocket) => panic!("no markers sent"),
                    None => std::thread::yield_now(),
                }
            }
        });
    }
}
