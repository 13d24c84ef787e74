//! The wire format: one frame is a fixed 64-byte header, a body made of the
//! rkyv-archived metadata, a payload table, and the tensor payloads at
//! 64-byte aligned offsets outside the archive.
//!
//! ```text
//! header (64 B)  magic "RFLW" | version u16 | kind u8 | flags u8 | method u16 | reserved u16
//!                payload_count u32 | request_id u64 | meta_len u64 | table_len u64
//!                payload_bytes u64 | body_len u64 | reserved u64           (little-endian)
//! body           meta (rkyv archive, at body offset 0)
//!                pad to 8 | payload table: per payload {dtype u8, rank u8, 6 B zero,
//!                byte_len u64, dims u64 × rank}
//!                pad to 64 | payload 0 | pad to 64 | payload 1 | pad to 64 | ...
//! ```
//!
//! A payload is its tensor's bytes: little-endian elements, or for a string
//! tensor its image as `tensor::strings` lays it out (one u64 end offset per
//! element, then the concatenated bytes), checked on receipt before any
//! kernel sees it.
//!
//! Every length is 64-bit and every frame is a multiple of 64 bytes, so in a
//! receive stream that starts 64-byte aligned every body and every payload is
//! 64-byte aligned too, and tensors can point straight into the buffer the
//! kernel wrote.
//!
//! Owns: header and body layout, encoding (into iovec-ready pieces, without
//! copying payloads) and decoding of a complete body in place (validating
//! every length against the buffer and the limits). Must not touch sockets,
//! threads or clocks: the I/O layer hands it bytes (quinn's discipline), so
//! all of it is testable and fuzzable in memory.

use crate::alloc::IoBuf;
use crate::tensor::{DType, Keepalive, TENSOR_ALIGN, Tensor};
use smallvec::SmallVec;
use std::io::IoSlice;
use std::ptr::NonNull;
use std::sync::Arc;

pub const MAGIC: [u8; 4] = *b"RFLW";
pub const PROTOCOL_VERSION: u16 = 4;
pub const HEADER_BYTES: usize = 64;
/// Payloads (and frames) are aligned to this many bytes.
pub const PAYLOAD_ALIGN: usize = TENSOR_ALIGN;
/// Largest tensor rank a frame may carry.
pub const MAX_RANK: usize = 32;
const TABLE_ENTRY_FIXED_BYTES: u64 = 16;

const _: () = assert!(HEADER_BYTES % PAYLOAD_ALIGN == 0);

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// First frame each way on a connection: protocol version, incarnation.
    Hello = 1,
    Request = 2,
    Response = 3,
    /// A response carrying an error (`message::ErrorMeta`).
    Error = 4,
    /// One-way message; never answered.
    Push = 5,
    /// A client's cluster-secret proof, or the server's acceptance of it.
    Auth = 6,
    /// Transport negotiation after the handshake (`net::shm`'s offer and
    /// answers); never seen above the connection.
    Transport = 7,
}

impl FrameKind {
    pub fn from_u8(value: u8) -> Option<FrameKind> {
        Some(match value {
            1 => FrameKind::Hello,
            2 => FrameKind::Request,
            3 => FrameKind::Response,
            4 => FrameKind::Error,
            5 => FrameKind::Push,
            6 => FrameKind::Auth,
            7 => FrameKind::Transport,
            _ => return None,
        })
    }
}

/// Limits a decoder enforces before allocating anything.
#[derive(Debug, Clone, Copy)]
pub struct FrameLimits {
    /// Largest header + body accepted, in bytes.
    pub max_frame_bytes: u64,
    pub max_payloads: u32,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits { max_frame_bytes: 8 << 30, max_payloads: 1 << 16 }
    }
}

/// Why a frame was rejected. Each variant is a reason that gets logged
/// before the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad magic {0:02x?} (not a ringflow peer?)")]
    BadMagic([u8; 4]),
    #[error("unsupported protocol version {0} (this side speaks {PROTOCOL_VERSION})")]
    UnsupportedVersion(u16),
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    Oversized { len: u64, max: u64 },
    #[error("{count} payloads exceed the limit of {max}")]
    TooManyPayloads { count: u32, max: u32 },
    #[error("inconsistent lengths: {0}")]
    InconsistentLengths(String),
    #[error("bad payload table: {0}")]
    BadPayloadTable(String),
    #[error("bad payload {index}: {reason}")]
    BadPayload { index: u32, reason: String },
    #[error("truncated: {have} of {need} bytes")]
    Truncated { need: u64, have: u64 },
    #[error("unexpected {kind:?} frame: {reason}")]
    Unexpected { kind: FrameKind, reason: String },
    #[error("buffer of {0} bytes cannot be allocated: {1}")]
    Alloc(u64, String),
}

/// A decoded header. Constructing one through [`FrameHeader::decode`]
/// guarantees the lengths are consistent and within the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: FrameKind,
    pub flags: u8,
    pub method: u16,
    pub payload_count: u32,
    pub request_id: u64,
    pub meta_len: u64,
    pub table_len: u64,
    pub payload_bytes: u64,
    pub body_len: u64,
}

/// Where each part of a body lies, computed from lengths alone (so it is
/// checked for > 4 GiB frames without allocating them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLayout {
    pub table_offset: u64,
    pub payload_offset: u64,
    pub body_len: u64,
}

fn align_up(value: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    value.checked_add(align - 1).map(|v| v & !(align - 1))
}

/// The layout of a body with these lengths, `None` on arithmetic overflow.
pub fn body_layout(meta_len: u64, table_len: u64, payload_bytes: u64) -> Option<BodyLayout> {
    let table_offset = align_up(meta_len, 8)?;
    let payload_offset = align_up(table_offset.checked_add(table_len)?, PAYLOAD_ALIGN as u64)?;
    let body_len = payload_offset.checked_add(payload_bytes)?;
    if body_len % PAYLOAD_ALIGN as u64 != 0 {
        return None;
    }
    Some(BodyLayout { table_offset, payload_offset, body_len })
}

/// A payload's length padded to the payload alignment.
pub fn padded_payload_len(byte_len: u64) -> Option<u64> {
    align_up(byte_len, PAYLOAD_ALIGN as u64)
}

fn table_entry_len(rank: usize) -> u64 {
    TABLE_ENTRY_FIXED_BYTES + 8 * rank as u64
}

impl FrameHeader {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        out[6] = self.kind as u8;
        out[7] = self.flags;
        out[8..10].copy_from_slice(&self.method.to_le_bytes());
        // 10..12 reserved
        out[12..16].copy_from_slice(&self.payload_count.to_le_bytes());
        out[16..24].copy_from_slice(&self.request_id.to_le_bytes());
        out[24..32].copy_from_slice(&self.meta_len.to_le_bytes());
        out[32..40].copy_from_slice(&self.table_len.to_le_bytes());
        out[40..48].copy_from_slice(&self.payload_bytes.to_le_bytes());
        out[48..56].copy_from_slice(&self.body_len.to_le_bytes());
        // 56..64 reserved
        out
    }

    /// Decodes and checks a header: magic, version, kind, that the lengths
    /// add up to `body_len`, and the limits. Allocates nothing.
    pub fn decode(bytes: &[u8], limits: &FrameLimits) -> Result<FrameHeader, FrameError> {
        if bytes.len() < HEADER_BYTES {
            return Err(FrameError::Truncated { need: HEADER_BYTES as u64, have: bytes.len() as u64 });
        }
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes in bounds"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes in bounds"));
        let magic: [u8; 4] = bytes[0..4].try_into().expect("4 bytes in bounds");
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        let version = u16_at(4);
        if version != PROTOCOL_VERSION {
            return Err(FrameError::UnsupportedVersion(version));
        }
        let kind = FrameKind::from_u8(bytes[6]).ok_or(FrameError::UnknownKind(bytes[6]))?;
        let header = FrameHeader {
            kind,
            flags: bytes[7],
            method: u16_at(8),
            payload_count: u32_at(12),
            request_id: u64_at(16),
            meta_len: u64_at(24),
            table_len: u64_at(32),
            payload_bytes: u64_at(40),
            body_len: u64_at(48),
        };
        header.check(limits)?;
        Ok(header)
    }

    pub(crate) fn check(&self, limits: &FrameLimits) -> Result<(), FrameError> {
        let frame_len = self.body_len.saturating_add(HEADER_BYTES as u64);
        if frame_len > limits.max_frame_bytes {
            return Err(FrameError::Oversized { len: frame_len, max: limits.max_frame_bytes });
        }
        if self.payload_count > limits.max_payloads {
            return Err(FrameError::TooManyPayloads { count: self.payload_count, max: limits.max_payloads });
        }
        let min_table = u64::from(self.payload_count) * TABLE_ENTRY_FIXED_BYTES;
        let max_table = u64::from(self.payload_count) * table_entry_len(MAX_RANK);
        if self.table_len < min_table || self.table_len > max_table || self.table_len % 8 != 0 {
            return Err(FrameError::InconsistentLengths(format!(
                "payload table of {} bytes for {} payloads",
                self.table_len, self.payload_count
            )));
        }
        if self.payload_bytes % PAYLOAD_ALIGN as u64 != 0 {
            return Err(FrameError::InconsistentLengths(format!(
                "payload bytes {} not a multiple of {PAYLOAD_ALIGN}",
                self.payload_bytes
            )));
        }
        match body_layout(self.meta_len, self.table_len, self.payload_bytes) {
            Some(layout) if layout.body_len == self.body_len => Ok(()),
            Some(layout) => Err(FrameError::InconsistentLengths(format!(
                "body_len {} but meta {} + table {} + payloads {} lay out to {}",
                self.body_len, self.meta_len, self.table_len, self.payload_bytes, layout.body_len
            ))),
            None => Err(FrameError::InconsistentLengths(format!(
                "meta {} + table {} + payloads {} overflow",
                self.meta_len, self.table_len, self.payload_bytes
            ))),
        }
    }

    /// Header plus body, in bytes.
    pub fn frame_len(&self) -> u64 {
        HEADER_BYTES as u64 + self.body_len
    }

    /// Bytes before the first payload: header, metadata and table, padded.
    pub fn head_len(&self) -> usize {
        HEADER_BYTES + self.layout().payload_offset as usize
    }

    /// The header of a frame carrying `parts`, checked against `limits`
    /// as a received one would be.
    pub fn for_parts(parts: &FrameParts<'_>, limits: &FrameLimits) -> Result<FrameHeader, FrameError> {
        let FrameParts { kind, method, request_id, meta, payloads } = *parts;
        let payload_count = u32::try_from(payloads.len()).ok().filter(|&n| n <= limits.max_payloads).ok_or(
            FrameError::TooManyPayloads {
                count: payloads.len().min(u32::MAX as usize) as u32,
                max: limits.max_payloads,
            },
        )?;
        let mut table_len = 0u64;
        let mut payload_bytes = 0u64;
        for (index, tensor) in payloads.iter().enumerate() {
            if tensor.rank() > MAX_RANK {
                return Err(FrameError::BadPayload {
                    index: index as u32,
                    reason: format!("rank {} exceeds {MAX_RANK}", tensor.rank()),
                });
            }
            table_len += table_entry_len(tensor.rank());
            payload_bytes = padded_payload_len(tensor.byte_len() as u64)
                .and_then(|p| payload_bytes.checked_add(p))
                .ok_or_else(|| FrameError::InconsistentLengths("payloads overflow".into()))?;
        }
        let meta_len = meta.len() as u64;
        let layout = body_layout(meta_len, table_len, payload_bytes)
            .ok_or_else(|| FrameError::InconsistentLengths("frame overflows".into()))?;
        let frame_len = layout.body_len.saturating_add(HEADER_BYTES as u64);
        if frame_len > limits.max_frame_bytes {
            return Err(FrameError::Oversized { len: frame_len, max: limits.max_frame_bytes });
        }
        // The lengths agree by construction (`check` would find what the
        // peer's decoder finds: nothing); only the limits were left.
        let header = FrameHeader {
            kind,
            flags: 0,
            method,
            payload_count,
            request_id,
            meta_len,
            table_len,
            payload_bytes,
            body_len: layout.body_len,
        };
        debug_assert_eq!(header.check(limits), Ok(()));
        Ok(header)
    }

    pub fn layout(&self) -> BodyLayout {
        body_layout(self.meta_len, self.table_len, self.payload_bytes).expect("decoded headers have a valid layout")
    }
}

/// What a frame carries, before it is laid out.
#[derive(Clone, Copy)]
pub struct FrameParts<'a> {
    pub kind: FrameKind,
    pub method: u16,
    pub request_id: u64,
    pub meta: &'a [u8],
    pub payloads: &'a [Tensor],
}

/// An encoded frame ready to send: one contiguous `head` (header, meta and
/// table) and the payload tensors, sent by reference as a vectored write.
pub struct OutgoingFrame {
    pub header: FrameHeader,
    head: Vec<u8>,
    payloads: smallvec::SmallVec<[Tensor; 2]>,
}

static ZERO_PAD: [u8; PAYLOAD_ALIGN] = [0; PAYLOAD_ALIGN];

impl OutgoingFrame {
    /// Lays out a frame. Payload bytes are not copied: the frame keeps the
    /// tensors alive until it is sent.
    pub fn new(
        kind: FrameKind,
        method: u16,
        request_id: u64,
        meta: &[u8],
        payloads: &[Tensor],
        limits: &FrameLimits,
    ) -> Result<OutgoingFrame, FrameError> {
        let parts = FrameParts { kind, method, request_id, meta, payloads };
        let header = FrameHeader::for_parts(&parts, limits)?;
        Ok(Self::with_header(header, meta, payloads))
    }

    /// As [`new`](Self::new), with the header `FrameHeader::for_parts`
    /// made for these parts.
    pub fn with_header(header: FrameHeader, meta: &[u8], payloads: &[Tensor]) -> OutgoingFrame {
        let head_len = header.head_len();
        let mut head = Vec::with_capacity(head_len);
        // SAFETY: the vector's spare capacity is `head_len` writable bytes
        // nobody else sees; `write_head` fills every one of them.
        unsafe {
            write_head(&header, meta, payloads, head.as_mut_ptr());
            head.set_len(head_len);
        }
        OutgoingFrame { header, head, payloads: payloads.iter().cloned().collect() }
    }

    /// The frame as slices in wire order (head, then each payload and its
    /// padding). Empty slices are left out.
    pub fn io_slices(&self) -> crate::net::io::FrameSlices<'_> {
        let mut slices = crate::net::io::FrameSlices::with_capacity(1 + 2 * self.payloads.len());
        slices.push(IoSlice::new(&self.head));
        for tensor in &self.payloads {
            let bytes = tensor.as_bytes();
            if !bytes.is_empty() {
                slices.push(IoSlice::new(bytes));
            }
            let pad = padded_payload_len(bytes.len() as u64).expect("checked in new") as usize - bytes.len();
            if pad > 0 {
                slices.push(IoSlice::new(&ZERO_PAD[..pad]));
            }
        }
        slices
    }

    /// The header, metadata and table: every byte before the payloads.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The metadata, as encoded in the head.
    pub fn meta(&self) -> &[u8] {
        &self.head[HEADER_BYTES..HEADER_BYTES + self.header.meta_len as usize]
    }

    /// The tensors whose bytes follow the head.
    pub fn payloads(&self) -> &[Tensor] {
        &self.payloads
    }

    /// Bytes of tensor payload (unpadded) this frame carries.
    pub fn payload_data_bytes(&self) -> u64 {
        self.payloads.iter().map(|t| t.byte_len() as u64).sum()
    }

    /// The whole frame copied into one vector (tests and fuzz seeds only).
    pub fn to_vec(&self) -> Vec<u8> {
        self.io_slices().iter().flat_map(|s| s.iter().copied()).collect()
    }
}

/// Writes a frame's head (`header.head_len()` bytes: header, `meta`, the
/// payload table for `payloads`, zero padding) to `dst`, the one encoder
/// of heads, whether into a vector or straight into a shared-memory slot.
///
/// # Safety
/// `header` was made by [`FrameHeader::for_parts`] from these `meta` and
/// `payloads`; `dst` has `header.head_len()` writable bytes that nobody
/// else reads or writes meanwhile.
pub unsafe fn write_head(header: &FrameHeader, meta: &[u8], payloads: &[Tensor], dst: *mut u8) {
    // SAFETY: the caller's `head_len` bytes: the header's 64, then the
    // body's head (`write_body_head`'s contract).
    unsafe {
        std::ptr::copy_nonoverlapping(header.encode().as_ptr(), dst, HEADER_BYTES);
        write_body_head(header, meta, payloads, dst.add(HEADER_BYTES));
    }
}

/// Writes the start of a frame's body (`header.layout().payload_offset`
/// bytes: `meta`, the payload table for `payloads`, zero padding) to `dst`.
///
/// # Safety
/// As [`write_head`], with `payload_offset` writable bytes at `dst`.
pub unsafe fn write_body_head(header: &FrameHeader, meta: &[u8], payloads: &[Tensor], dst: *mut u8) {
    /// Appends to the caller's bytes.
    struct Head {
        dst: *mut u8,
        at: usize,
        end: usize,
    }
    impl Head {
        fn put(&mut self, bytes: &[u8]) {
            assert!(bytes.len() <= self.end - self.at, "the head's parts fit its layout");
            // SAFETY: inside the `end` bytes at `dst` (checked just above),
            // which `write_body_head`'s caller gave us.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.dst.add(self.at), bytes.len()) };
            self.at += bytes.len();
        }
    }
    debug_assert_eq!(header.meta_len, meta.len() as u64);
    let layout = header.layout();
    if payloads.is_empty() && meta.len() as u64 == layout.payload_offset {
        // Metadata alone, a whole number of lines (a small call's usual
        // body): one copy.
        // SAFETY: `payload_offset` == `meta.len()` bytes at `dst`, the
        // caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(meta.as_ptr(), dst, meta.len()) };
        return;
    }
    let zeros = [0u8; PAYLOAD_ALIGN];
    let mut head = Head { dst, at: 0, end: layout.payload_offset as usize };
    head.put(meta);
    head.put(&zeros[..layout.table_offset as usize - meta.len()]);
    for tensor in payloads {
        let mut fixed = [0u8; TABLE_ENTRY_FIXED_BYTES as usize];
        fixed[0] = tensor.dtype().code();
        fixed[1] = tensor.rank() as u8;
        fixed[8..16].copy_from_slice(&(tensor.byte_len() as u64).to_le_bytes());
        head.put(&fixed);
        for &dim in tensor.dims() {
            head.put(&(dim as u64).to_le_bytes());
        }
    }
    let pad = head.end - head.at;
    head.put(&zeros[..pad]);
}

/// Payload bytes of a received frame that lie outside its head: `len`
/// bytes at `base` in `buf`.
pub struct PayloadPart {
    pub buf: Arc<IoBuf>,
    pub base: usize,
    pub len: usize,
}

/// A frame's payload parts (one, unless a split frame's payloads were
/// written into several spans).
pub type PayloadParts = SmallVec<[PayloadPart; 1]>;

/// Where a frame's payload bytes past its head lie, for
/// [`ReceivedFrame::parse_from`].
trait PayloadSource {
    /// How many of the `len` bytes past the head it holds, or why its
    /// layout cannot hold them.
    fn holding(&self, len: usize) -> Result<usize, FrameError>;
    /// The buffer and offset of the `padded` bytes `at` bytes past the
    /// head (called in order), or `None` when they do not lie within one
    /// of its buffers.
    fn locate(&mut self, at: usize, padded: usize) -> Option<(&Arc<IoBuf>, usize)>;
    /// Its first buffer, if it has one.
    fn into_first(self) -> Option<Arc<IoBuf>>;
}

/// All of them at `base` in `buf`.
struct OneBuffer {
    buf: Arc<IoBuf>,
    base: usize,
}

impl PayloadSource for OneBuffer {
    fn holding(&self, len: usize) -> Result<usize, FrameError> {
        match self.base % PAYLOAD_ALIGN {
            0 => Ok(self.buf.len().saturating_sub(self.base).min(len)),
            _ => Ok(0),
        }
    }

    fn locate(&mut self, at: usize, _padded: usize) -> Option<(&Arc<IoBuf>, usize)> {
        // `holding` covered every byte, and the caller checks that these
        // lie within the frame's.
        Some((&self.buf, self.base + at))
    }

    fn into_first(self) -> Option<Arc<IoBuf>> {
        Some(self.buf)
    }
}

/// None: the head's buffer holds every payload byte.
struct NothingPast;

impl PayloadSource for NothingPast {
    fn holding(&self, _len: usize) -> Result<usize, FrameError> {
        Ok(0)
    }

    fn locate(&mut self, _at: usize, _padded: usize) -> Option<(&Arc<IoBuf>, usize)> {
        None
    }

    fn into_first(self) -> Option<Arc<IoBuf>> {
        None
    }
}

/// In `parts`, in order; `part_at` bytes of `parts[part]` located so far.
struct InParts {
    parts: PayloadParts,
    part: usize,
    part_at: usize,
}

impl PayloadSource for InParts {
    fn holding(&self, len: usize) -> Result<usize, FrameError> {
        let in_parts = self.parts.iter().try_fold(0usize, |sum, part| sum.checked_add(part.len));
        if in_parts != Some(len) {
            return Err(FrameError::InconsistentLengths(format!(
                "{len} payload bytes past the head, in parts of {:?} bytes",
                self.parts.iter().map(|p| p.len).collect::<Vec<_>>()
            )));
        }
        let short = |p: &PayloadPart| p.base % PAYLOAD_ALIGN != 0 || p.buf.len().saturating_sub(p.base) < p.len;
        match self.parts.iter().any(short) {
            true => Ok(self.parts.iter().map(|p| p.buf.len().saturating_sub(p.base).min(p.len)).sum()),
            false => Ok(len),
        }
    }

    fn locate(&mut self, _at: usize, padded: usize) -> Option<(&Arc<IoBuf>, usize)> {
        // Empty payloads stay where the last one ended; others move on
        // past parts that are used up.
        while padded > 0 && self.part + 1 < self.parts.len() && self.part_at == self.parts[self.part].len {
            self.part += 1;
            self.part_at = 0;
        }
        let here = self.parts.get(self.part)?;
        if padded > here.len - self.part_at {
            return None;
        }
        self.part_at += padded;
        Some((&here.buf, here.base + self.part_at - padded))
    }

    fn into_first(self) -> Option<Arc<IoBuf>> {
        self.parts.into_iter().next().map(|part| part.buf)
    }
}

/// A received frame whose body lies in a shared receive buffer. The
/// metadata is read in place; payload tensors borrow the buffer, which
/// lives as long as the frame or any of its tensors.
#[derive(Clone)]
pub struct ReceivedFrame {
    pub header: FrameHeader,
    /// Holds the metadata and payload table, from `body_offset`.
    head_buf: Arc<IoBuf>,
    body_offset: usize,
    /// Holds the payloads when the reader gave a large frame's payloads a
    /// buffer of their own (`None`: `head_buf` holds them).
    payload_buf: Option<Arc<IoBuf>>,
    payloads: Vec<Tensor>,
}

impl std::fmt::Debug for ReceivedFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedFrame").field("header", &self.header).field("payloads", &self.payloads.len()).finish()
    }
}

impl ReceivedFrame {
    /// Parses a complete body at `body_offset` in `buf`: reads the payload
    /// table, checks each entry against the header and the buffer, and makes
    /// tensors over the payload bytes (no copy).
    pub fn parse(header: FrameHeader, buf: Arc<IoBuf>, body_offset: usize) -> Result<ReceivedFrame, FrameError> {
        if header.payload_count == 0 && header.payload_bytes == 0 && header.table_len == 0 {
            // Metadata alone (most requests and replies): nothing to scan.
            let head_end = usize::try_from(header.meta_len.next_multiple_of(8))
                .ok()
                .and_then(|head_len| body_offset.checked_add(head_len));
            if body_offset % PAYLOAD_ALIGN != 0 || head_end.is_none_or(|end| end > buf.len()) {
                return Err(FrameError::Truncated {
                    need: header.body_len,
                    have: buf.len().saturating_sub(body_offset) as u64,
                });
            }
            return Ok(ReceivedFrame { header, head_buf: buf, body_offset, payload_buf: None, payloads: Vec::new() });
        }
        // Every payload byte follows the head in the same buffer.
        let in_head = usize::try_from(header.payload_bytes)
            .map_err(|_| FrameError::InconsistentLengths("payloads exceed address space".into()))?;
        Self::parse_from(header, buf, body_offset, in_head, NothingPast)
    }

    /// A frame of metadata alone whose header its reader built from
    /// lengths it bounded itself (a shared-memory line frame: at most a
    /// line of metadata, no table, no payloads), at the start of `buf`:
    /// nothing to scan or check.
    pub fn metadata_only(header: FrameHeader, buf: Arc<IoBuf>) -> ReceivedFrame {
        assert!(
            header.payload_count == 0 && header.table_len == 0 && header.payload_bytes == 0,
            "a metadata-only frame has no payloads"
        );
        assert!(header.meta_len.next_multiple_of(8) <= buf.len() as u64, "the buffer holds the metadata");
        ReceivedFrame { header, head_buf: buf, body_offset: 0, payload_buf: None, payloads: Vec::new() }
    }

    /// Like [`parse`](Self::parse), with the metadata and table at
    /// `body_offset` in `head_buf`, followed there by the first
    /// `in_head` payload bytes (whole payloads, padding included), and the
    /// rest of the payload bytes at `payload_base` in `payload_buf`.
    pub fn parse_split(
        header: FrameHeader,
        head_buf: Arc<IoBuf>,
        body_offset: usize,
        in_head: usize,
        payload_buf: Arc<IoBuf>,
        payload_base: usize,
    ) -> Result<ReceivedFrame, FrameError> {
        Self::parse_from(header, head_buf, body_offset, in_head, OneBuffer { buf: payload_buf, base: payload_base })
    }

    /// Like [`parse_split`](Self::parse_split), with the payload bytes past
    /// the head in `parts`, in order: each part holds whole payloads
    /// (padding included), and together they hold every byte the head
    /// does not.
    pub fn parse_parts(
        header: FrameHeader,
        head_buf: Arc<IoBuf>,
        body_offset: usize,
        in_head: usize,
        parts: PayloadParts,
    ) -> Result<ReceivedFrame, FrameError> {
        Self::parse_from(header, head_buf, body_offset, in_head, InParts { parts, part: 0, part_at: 0 })
    }

    /// The one parser behind the three above, compiled once per kind of
    /// payload source so that a whole frame in one buffer (every frame on
    /// the hot path) pays nothing for parts.
    fn parse_from(
        header: FrameHeader,
        head_buf: Arc<IoBuf>,
        body_offset: usize,
        in_head: usize,
        mut source: impl PayloadSource,
    ) -> Result<ReceivedFrame, FrameError> {
        let layout = header.layout();
        let head_len = (layout.table_offset + header.table_len) as usize;
        let payload_len = usize::try_from(header.payload_bytes)
            .map_err(|_| FrameError::InconsistentLengths("payloads exceed address space".into()))?;
        if in_head > payload_len || in_head % PAYLOAD_ALIGN != 0 {
            return Err(FrameError::InconsistentLengths(format!(
                "{in_head} payload bytes in the head of a frame with {payload_len}"
            )));
        }
        let in_head_end = (layout.payload_offset as usize).saturating_add(in_head);
        let head_available = head_buf.len().saturating_sub(body_offset);
        let past_head = source.holding(payload_len - in_head)?;
        if body_offset % PAYLOAD_ALIGN != 0
            || head_available < head_len.max(if in_head > 0 { in_head_end } else { 0 })
            || past_head < payload_len - in_head
        {
            return Err(FrameError::Truncated {
                need: header.body_len,
                have: (head_available.min(head_len) + in_head.min(head_available) + past_head) as u64,
            });
        }
        // SAFETY: the table lies in the complete head (checked above; the
        // reader only parses a frame once every byte was received), which is
        // never written again: the reader writes only beyond the bytes it
        // has handed to frames.
        let table = unsafe { head_buf.slice(body_offset + layout.table_offset as usize, header.table_len as usize) };
        let mut payloads = Vec::with_capacity(header.payload_count as usize);
        let mut at = 0usize;
        // Offsets into the frame's payload bytes: the first `in_head` lie
        // in the head buffer, the rest in `source`.
        let mut payload_at = 0usize;
        let in_head_base = body_offset + layout.payload_offset as usize;
        for index in 0..header.payload_count {
            let bad = |reason: String| FrameError::BadPayloadTable(format!("entry {index}: {reason}"));
            if table.len() - at < TABLE_ENTRY_FIXED_BYTES as usize {
                return Err(bad("table ends early".into()));
            }
            let dtype = DType::from_code(table[at]).ok_or_else(|| bad(format!("unknown dtype code {}", table[at])))?;
            let rank = table[at + 1] as usize;
            if rank > MAX_RANK {
                return Err(bad(format!("rank {rank} exceeds {MAX_RANK}")));
            }
            if table[at + 2..at + 8].iter().any(|&b| b != 0) {
                return Err(bad("reserved bytes are not zero".into()));
            }
            let byte_len = u64::from_le_bytes(table[at + 8..at + 16].try_into().expect("8 bytes in bounds"));
            at += TABLE_ENTRY_FIXED_BYTES as usize;
            if table.len() - at < 8 * rank {
                return Err(bad("dims run past the table".into()));
            }
            let mut dims: SmallVec<[usize; 4]> = SmallVec::with_capacity(rank);
            for _ in 0..rank {
                let dim = u64::from_le_bytes(table[at..at + 8].try_into().expect("8 bytes"));
                dims.push(usize::try_from(dim).map_err(|_| bad(format!("dim {dim} too large")))?);
                at += 8;
            }
            // A string payload's length comes from its contents, which
            // `from_borrowed` checks below.
            if let Some(width) = dtype.size() {
                let fixed_len =
                    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).and_then(|n| n.checked_mul(width));
                if fixed_len.map(|n| n as u64) != Some(byte_len) {
                    return Err(bad(format!("{byte_len} bytes do not hold a {dtype} tensor of dims {dims:?}")));
                }
            }
            let len = byte_len as usize;
            let padded = padded_payload_len(byte_len).unwrap_or(u64::MAX);
            if padded > (payload_len - payload_at) as u64 {
                return Err(bad(format!("payload of {byte_len} bytes runs past the frame's payload bytes")));
            }
            let padded = padded as usize;
            let located = match payload_at >= in_head {
                true => source.locate(payload_at - in_head, padded),
                false => None,
            };
            let (buf, at_in_buf) = match located {
                Some(found) => found,
                // In the head; or, with no bytes, anywhere.
                None if payload_at + padded <= in_head => (&head_buf, in_head_base + payload_at),
                None if payload_at < in_head => {
                    return Err(bad(format!("payload of {byte_len} bytes runs past the head's payload bytes")));
                }
                None => return Err(bad(format!("payload of {byte_len} bytes runs past the end of its payload part"))),
            };
            let ptr = NonNull::new(buf.as_mut_ptr().wrapping_add(at_in_buf))
                .expect("a buffer address plus an in-bounds offset is non-null");
            // SAFETY: [at_in_buf, at_in_buf + len) lies inside the complete,
            // never-again-written part of `buf` that holds this payload
            // (checked above and by the source); `keep` owns the buffer, so
            // the bytes outlive the tensor. The keepalive is cloned per
            // tensor, not per frame: most frames carry zero or one payload.
            let keep: Keepalive = buf.clone();
            let tensor = unsafe { Tensor::from_borrowed(dtype, dims.as_slice(), ptr, len, keep) }
                .map_err(|status| FrameError::BadPayload { index, reason: status.into_message() })?;
            payloads.push(tensor);
            payload_at += padded;
        }
        if at != table.len() {
            return Err(FrameError::BadPayloadTable(format!("{} unused table bytes", table.len() - at)));
        }
        if payload_at != payload_len {
            return Err(FrameError::InconsistentLengths(format!(
                "payloads fill {payload_at} of {} payload bytes",
                header.payload_bytes
            )));
        }
        let payload_buf = source.into_first();
        Ok(ReceivedFrame { header, head_buf, body_offset, payload_buf, payloads })
    }

    /// The rkyv-archived metadata, in place.
    pub fn meta_bytes(&self) -> &[u8] {
        // SAFETY: inside the complete body (checked in `parse`) and never
        // written again.
        unsafe { self.head_buf.slice(self.body_offset, self.header.meta_len as usize) }
    }

    pub fn payloads(&self) -> &[Tensor] {
        &self.payloads
    }

    pub fn into_payloads(self) -> Vec<Tensor> {
        self.payloads
    }

    /// Moves the payload tensors out (the frame keeps its buffer alive).
    pub fn take_payloads(&mut self) -> Vec<Tensor> {
        std::mem::take(&mut self.payloads)
    }

    /// The receive buffer the payloads lie in (for no-copy checks).
    pub fn buffer(&self) -> &Arc<IoBuf> {
        self.payload_buf.as_ref().unwrap_or(&self.head_buf)
    }

    /// The receive buffer the metadata lies in.
    pub fn meta_buffer(&self) -> &Arc<IoBuf> {
        &self.head_buf
    }
}

/// Decodes one whole frame held in `bytes` (copied once into an aligned
/// buffer). The entry point for the fuzzer and for tests; the live path uses
/// [`FrameReader`](super::reader::FrameReader), which does not copy.
pub fn decode_frame(bytes: &[u8], limits: &FrameLimits) -> Result<ReceivedFrame, FrameError> {
    let header = FrameHeader::decode(bytes, limits)?;
    if (bytes.len() as u64) < header.frame_len() {
        return Err(FrameError::Truncated { need: header.frame_len(), have: bytes.len() as u64 });
    }
    let body_len = header.body_len as usize;
    let buf = IoBuf::zeroed(body_len).map_err(|e| FrameError::Alloc(header.body_len, e.to_string()))?;
    // SAFETY: `buf` is fresh and exclusively ours; `body_len` bytes fit it and
    // the source has at least that many after the header (checked above).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().add(HEADER_BYTES), buf.as_mut_ptr(), body_len) };
    ReceivedFrame::parse(header, Arc::new(buf), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> FrameLimits {
        FrameLimits::default()
    }

    fn sample_tensors() -> Vec<Tensor> {
        vec![
            Tensor::from_slice::<f32>([2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap(),
            Tensor::from_slice::<f64>([1], &[f64::NAN]).unwrap(),
            Tensor::from_slice::<i32>([3], &[i32::MIN, 0, i32::MAX]).unwrap(),
            Tensor::from_slice::<i64>([2, 1], &[i64::MIN, -1]).unwrap(),
            Tensor::from_slice::<bool>([3], &[true, false, true]).unwrap(),
            Tensor::zeros(DType::F32, [0, 7]).unwrap(),
            Tensor::scalar(7i64),
            Tensor::build::<f32>([300], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32 * 0.5)).unwrap(),
        ]
    }

    /// `bytes` in a fresh receive buffer.
    fn buffer_of(bytes: &[u8]) -> Arc<IoBuf> {
        let buf = IoBuf::zeroed(bytes.len()).unwrap();
        // SAFETY: a fresh buffer of exactly `bytes.len()` bytes, ours alone.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.as_mut_ptr(), bytes.len()) };
        Arc::new(buf)
    }

    /// A frame of metadata alone parses without a table scan, and a
    /// buffer or offset that cannot hold its metadata is refused as the
    /// general parse refuses it.
    #[test]
    fn a_metadata_only_frame_parses_in_place_and_a_short_one_is_refused() {
        let meta = vec![7u8; 100];
        let frame = OutgoingFrame::new(FrameKind::Response, 2, 5, &meta, &[], &limits()).unwrap();
        let body = buffer_of(&frame.to_vec()[HEADER_BYTES..]);
        let parsed = ReceivedFrame::parse(frame.header, body.clone(), 0).unwrap();
        assert_eq!((parsed.meta_bytes(), parsed.payloads().len()), (&meta[..], 0));
        assert!(Arc::ptr_eq(parsed.buffer(), &body) && Arc::ptr_eq(parsed.meta_buffer(), &body));
        let short = buffer_of(&frame.to_vec()[HEADER_BYTES..HEADER_BYTES + 100]);
        assert!(matches!(ReceivedFrame::parse(frame.header, short, 0), Err(FrameError::Truncated { .. })));
        let wide = buffer_of(&[0u8; 256]);
        for offset in [8, 192] {
            let parsed = ReceivedFrame::parse(frame.header, wide.clone(), offset);
            assert!(matches!(parsed, Err(FrameError::Truncated { .. })), "body at {offset}");
        }
    }

    /// The sample tensors in a frame with `meta`, its wire bytes, and the
    /// payload bytes before each payload (and after the last): where a
    /// split of its payloads may fall.
    fn sample_split(meta: &[u8]) -> (Vec<Tensor>, OutgoingFrame, Vec<u8>, Vec<usize>) {
        let tensors = sample_tensors();
        let frame = OutgoingFrame::new(FrameKind::Response, 2, 4, meta, &tensors, &limits()).unwrap();
        let wire = frame.to_vec();
        let mut boundaries = vec![0usize];
        for t in &tensors {
            boundaries.push(boundaries.last().unwrap() + padded_payload_len(t.byte_len() as u64).unwrap() as usize);
        }
        (tensors, frame, wire, boundaries)
    }

    #[test]
    fn a_split_body_takes_its_first_payloads_from_the_head_and_the_rest_from_the_span() {
        let (tensors, frame, wire, boundaries) = sample_split(b"split");
        let body = &wire[HEADER_BYTES..];
        let payload_offset = frame.header.layout().payload_offset as usize;
        for &in_head in &boundaries {
            let head = buffer_of(&body[..payload_offset + in_head]);
            let span = buffer_of(&body[payload_offset + in_head..]);
            let got = ReceivedFrame::parse_split(frame.header, head.clone(), 0, in_head, span.clone(), 0).unwrap();
            assert_eq!(got.meta_bytes(), b"split");
            for (i, (a, b)) in got.payloads().iter().zip(&tensors).enumerate() {
                assert!(a.bit_eq(b), "split at {in_head}: payload {i}");
                let home = if boundaries[i] < in_head { &head } else { &span };
                assert!(a.byte_len() == 0 || home.contains(a.data_ptr()), "split at {in_head}: payload {i} misplaced");
            }
        }
        // A head ending inside a payload, or short of its own bytes, is refused.
        let inside = boundaries[7] + 64; // the last payload is 1,200 bytes
        let head = buffer_of(&body[..payload_offset + inside]);
        let span = buffer_of(&body[payload_offset + inside..]);
        assert!(ReceivedFrame::parse_split(frame.header, head, 0, inside, span, 0).is_err());
        let head = buffer_of(&body[..payload_offset]);
        let span = buffer_of(&body[payload_offset..]);
        assert!(ReceivedFrame::parse_split(frame.header, head, 0, boundaries[1], span, 0).is_err());
        let head = buffer_of(&body[..payload_offset + 32]);
        assert!(ReceivedFrame::parse_split(frame.header, head, 0, 32, buffer_of(&body[payload_offset..]), 0).is_err());
    }

    /// Payload bytes past the head may come in several parts (a split
    /// frame over several ring spans): each payload is read from the part
    /// that holds it; a part ending inside a payload, or parts that do not
    /// add up to the payload bytes, are refused.
    #[test]
    fn a_body_in_parts_takes_each_payload_from_its_part() {
        let (tensors, frame, wire, boundaries) = sample_split(b"parts");
        let body = &wire[HEADER_BYTES..];
        let payload_offset = frame.header.layout().payload_offset as usize;
        let end = *boundaries.last().unwrap();
        let parts_at = |cuts: &[usize]| -> (Vec<Arc<IoBuf>>, PayloadParts) {
            let mut bufs = Vec::new();
            let mut parts = PayloadParts::new();
            for pair in cuts.windows(2) {
                let buf = buffer_of(&body[payload_offset + pair[0]..payload_offset + pair[1]]);
                bufs.push(buf.clone());
                parts.push(PayloadPart { buf, base: 0, len: pair[1] - pair[0] });
            }
            (bufs, parts)
        };
        let head = buffer_of(&body[..payload_offset + boundaries[2]]);
        // Every payload past the second in a part of its own, and then the
        // same bytes in two parts.
        for cuts in [boundaries[2..].to_vec(), vec![boundaries[2], boundaries[5], end]] {
            let (bufs, parts) = parts_at(&cuts);
            let got = ReceivedFrame::parse_parts(frame.header, head.clone(), 0, boundaries[2], parts).unwrap();
            assert_eq!(got.meta_bytes(), b"parts");
            for (i, (a, b)) in got.payloads().iter().zip(&tensors).enumerate() {
                assert!(a.bit_eq(b), "cuts {cuts:?}: payload {i}");
                if a.byte_len() == 0 {
                    continue;
                }
                let home = match i {
                    0 | 1 => &head,
                    _ => &bufs[cuts.iter().rposition(|&c| c <= boundaries[i]).unwrap()],
                };
                assert!(home.contains(a.data_ptr()), "cuts {cuts:?}: payload {i} misplaced");
            }
        }
        // A part ending inside a payload (the last is 1,200 bytes).
        let (_, parts) = parts_at(&[boundaries[2], boundaries[7] + 64, end]);
        assert!(ReceivedFrame::parse_parts(frame.header, head.clone(), 0, boundaries[2], parts).is_err());
        // Parts one payload short, or the head's bytes counted twice.
        let (_, parts) = parts_at(&[boundaries[2], boundaries[7]]);
        assert!(ReceivedFrame::parse_parts(frame.header, head.clone(), 0, boundaries[2], parts).is_err());
        let (_, parts) = parts_at(&[boundaries[1], end]);
        assert!(ReceivedFrame::parse_parts(frame.header, head, 0, boundaries[2], parts).is_err());
    }

    #[test]
    fn frames_round_trip_bit_exact_for_every_dtype_empty_and_scalar() {
        let tensors = sample_tensors();
        let meta = b"metadata bytes, any length";
        let frame = OutgoingFrame::new(FrameKind::Request, 7, 99, meta, &tensors, &limits()).unwrap();
        let wire = frame.to_vec();
        assert_eq!(wire.len() as u64, frame.header.frame_len());
        assert_eq!(wire.len() % PAYLOAD_ALIGN, 0);
        let got = decode_frame(&wire, &limits()).unwrap();
        assert_eq!(got.header, frame.header);
        assert_eq!(got.meta_bytes(), meta);
        assert_eq!(got.payloads().len(), tensors.len());
        for (a, b) in got.payloads().iter().zip(&tensors) {
            assert!(a.bit_eq(b), "{a:?} != {b:?}");
            assert!(got.buffer().contains(a.data_ptr()), "payload is not in the receive buffer");
            assert_eq!(a.data_ptr() as usize % PAYLOAD_ALIGN, 0);
        }
    }

    #[test]
    fn string_payloads_cross_as_their_image_and_are_checked_on_receipt() {
        let long = vec![0x5au8; 5000];
        let tensors = vec![
            Tensor::string_scalar("model.ckpt"),
            Tensor::from_strings([2, 2], &[&b""[..], b"\xff\x00", &long, b"w"]).unwrap(),
            Tensor::from_strings::<&str>([0, 3], &[]).unwrap(),
            Tensor::zeros(DType::String, [3]).unwrap(),
            Tensor::scalar(1.5f32),
        ];
        let frame = OutgoingFrame::new(FrameKind::Response, 3, 5, b"m", &tensors, &limits()).unwrap();
        let wire = frame.to_vec();
        let got = decode_frame(&wire, &limits()).unwrap();
        for (a, b) in got.payloads().iter().zip(&tensors) {
            assert!(a.bit_eq(b), "{a:?} != {b:?}");
            assert!(a.byte_len() == 0 || got.buffer().contains(a.data_ptr()), "string payload was copied");
        }
        assert_eq!(got.payloads()[1].strings().unwrap().get(2), Some(&long[..]));

        // An offset pointing past the string data is refused, not trusted.
        let one = Tensor::from_strings([2], &["ab", "cd"]).unwrap();
        let mut bad = OutgoingFrame::new(FrameKind::Push, 1, 1, b"", &[one], &limits()).unwrap().to_vec();
        let payload_at = HEADER_BYTES + 64;
        bad[payload_at..payload_at + 8].copy_from_slice(&99u64.to_le_bytes());
        let err = decode_frame(&bad, &limits()).unwrap_err();
        assert!(err.to_string().contains("bad payload 0") && err.to_string().contains("outside"), "{err}");
        // So is a byte length too short for the offsets of its dims.
        let table_at = HEADER_BYTES; // no metadata: the table comes first
        let mut bad =
            OutgoingFrame::new(FrameKind::Push, 1, 1, b"", &[Tensor::zeros(DType::String, [4]).unwrap()], &limits())
                .unwrap()
                .to_vec();
        bad[table_at + 8..table_at + 16].copy_from_slice(&8u64.to_le_bytes());
        let err = decode_frame(&bad, &limits()).unwrap_err();
        assert!(err.to_string().contains("cannot hold the offsets of 4 strings"), "{err}");
    }

    #[test]
    fn header_lengths_past_4_gib_are_encoded_and_checked_without_allocating() {
        let five_gib = 5u64 << 30;
        let table_len = table_entry_len(1);
        let layout = body_layout(100, table_len, five_gib).unwrap();
        assert_eq!(layout.payload_offset, 128);
        let header = FrameHeader {
            kind: FrameKind::Push,
            flags: 0,
            method: 1,
            payload_count: 1,
            request_id: u64::MAX,
            meta_len: 100,
            table_len,
            payload_bytes: five_gib,
            body_len: layout.body_len,
        };
        let bytes = header.encode();
        let big = FrameLimits { max_frame_bytes: 6 << 30, ..limits() };
        assert_eq!(FrameHeader::decode(&bytes, &big).unwrap(), header);
        assert_eq!(header.frame_len(), 64 + 128 + five_gib);
        // Under the default 8 GiB cap it passes, under a 4 GiB cap it is oversized.
        let small = FrameLimits { max_frame_bytes: 4 << 30, ..limits() };
        assert!(matches!(FrameHeader::decode(&bytes, &small), Err(FrameError::Oversized { .. })));
        // Lengths that would wrap 64-bit arithmetic are rejected, not wrapped.
        let mut wrapping = header;
        wrapping.payload_bytes = u64::MAX - 63;
        wrapping.body_len = 0;
        let unlimited = FrameLimits { max_frame_bytes: u64::MAX, ..limits() };
        assert!(matches!(FrameHeader::decode(&wrapping.encode(), &unlimited), Err(FrameError::InconsistentLengths(_))));
        assert!(body_layout(u64::MAX - 3, 0, 0).is_none());
        // A 2^33-element f32 dim is representable in the table.
        assert_eq!(padded_payload_len((1u64 << 33) * 4 + 1), Some((1u64 << 35) + 64));
    }

    #[test]
    fn malformed_frames_are_rejected_with_reasons() {
        let t = Tensor::from_slice::<i32>([4], &[1, 2, 3, 4]).unwrap();
        let good = OutgoingFrame::new(FrameKind::Request, 1, 1, b"meta", &[t], &limits()).unwrap().to_vec();
        let check = |bytes: &[u8], want: &str| {
            let err = decode_frame(bytes, &limits()).unwrap_err();
            assert!(err.to_string().contains(want), "{err} lacks '{want}'");
        };
        check(&good[..good.len() - 1], "truncated");
        check(&good[..10], "truncated");
        let mut bad = good.clone();
        bad[0] = b'X';
        check(&bad, "bad magic");
        let mut bad = good.clone();
        bad[4] = 9;
        check(&bad, "version");
        let mut bad = good.clone();
        bad[6] = 77;
        check(&bad, "unknown frame kind");
        let mut bad = good.clone();
        bad[48..56].copy_from_slice(&192u64.to_le_bytes());
        check(&bad, "inconsistent");
        let mut bad = good.clone();
        bad[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
        check(&bad, "exceeds the limit");
        let mut bad = good.clone();
        bad[40..48].copy_from_slice(&(1u64 << 62).to_le_bytes());
        check(&bad, "inconsistent");
        let table_at = HEADER_BYTES + 8;
        let mut bad = good.clone();
        bad[table_at] = 42;
        check(&bad, "unknown dtype");
        let mut bad = good.clone();
        bad[table_at + 8] = 15; // byte_len no longer matches dims
        check(&bad, "do not hold");
        let mut bad = good.clone();
        bad[table_at + 1] = 200;
        check(&bad, "rank");
        let tiny = FrameLimits { max_frame_bytes: 128, ..limits() };
        assert!(matches!(decode_frame(&good, &tiny), Err(FrameError::Oversized { .. })));
        let bools = Tensor::from_slice::<bool>([2], &[true, false]).unwrap();
        let mut bad = OutgoingFrame::new(FrameKind::Push, 1, 1, b"", &[bools], &limits()).unwrap().to_vec();
        let payload_at = HEADER_BYTES + 64;
        bad[payload_at] = 2;
        check(&bad, "bad payload 0");
    }
}
