//! How a frame's bytes lie in the ring: an inline frame's compact head
//! (a whole small frame in its slot), a frame or a split frame's head
//! written into a slot or span, payloads padded as on the wire, and which
//! received payloads may be read where they lie.
//!
//! Owns: those byte layouts, written and checked. Must not touch the
//! ring's indices (`ring.rs` reserves, publishes and releases) or decide
//! which form a frame takes (the channel, `mod.rs`).

use super::ring;
use crate::net::frame::{FrameError, FrameHeader, FrameKind, FrameLimits, HEADER_BYTES, OutgoingFrame};
use crate::tensor::{DType, Tensor};

/// Bytes of an inline frame's compact head: a slot carries a frame's body
/// after 24 bytes that say what the 64-byte frame header would (the
/// region's header already names the protocol; the body's length is the
/// slot's), so a request with 64 bytes of metadata lies in the slot's
/// first two cache lines (publish word, descriptor and head in the first),
/// not three.
///
/// ```text
/// kind u8 | flags u8 | method u16 | payload_count u32 | request_id u64 | meta_len u32 | table_len u32
/// ```
pub const INLINE_HEAD_BYTES: usize = 24;

/// A slot's bytes for a frame with this header (compact head and body),
/// when they fit it.
pub(crate) fn inline_len(header: &FrameHeader) -> Option<usize> {
    let len = INLINE_HEAD_BYTES as u64 + header.body_len;
    (len <= ring::INLINE_BYTES as u64).then_some(len as usize)
}

fn encode_inline_head(header: &FrameHeader) -> [u8; INLINE_HEAD_BYTES] {
    let mut out = [0u8; INLINE_HEAD_BYTES];
    out[0] = header.kind as u8;
    out[1] = header.flags;
    out[2..4].copy_from_slice(&header.method.to_le_bytes());
    out[4..8].copy_from_slice(&header.payload_count.to_le_bytes());
    out[8..16].copy_from_slice(&header.request_id.to_le_bytes());
    // An inline frame's lengths are below the slot's, so they fit 32 bits.
    out[16..20].copy_from_slice(&(header.meta_len as u32).to_le_bytes());
    out[20..24].copy_from_slice(&(header.table_len as u32).to_le_bytes());
    out
}

/// The header of an inline frame with a `body_len`-byte body, checked as
/// a frame header read off a socket is (kind, limits, lengths that add up).
pub(super) fn decode_inline_head(
    bytes: &[u8; INLINE_HEAD_BYTES],
    body_len: u64,
    limits: &FrameLimits,
) -> Result<FrameHeader, FrameError> {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes in bounds"));
    let kind = FrameKind::from_u8(bytes[0]).ok_or(FrameError::UnknownKind(bytes[0]))?;
    let meta_len = u64::from(u32_at(16));
    let table_len = u64::from(u32_at(20));
    let lengths =
        || format!("an inline frame's metadata ({meta_len} B) and table ({table_len} B) in a {body_len}-byte body");
    let payload_offset = crate::net::frame::body_layout(meta_len, table_len, 0)
        .ok_or_else(|| FrameError::InconsistentLengths(lengths()))?
        .payload_offset;
    let payload_bytes =
        body_len.checked_sub(payload_offset).ok_or_else(|| FrameError::InconsistentLengths(lengths()))?;
    let header = FrameHeader {
        kind,
        flags: bytes[1],
        method: u16::from_le_bytes([bytes[2], bytes[3]]),
        payload_count: u32_at(4),
        request_id: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes in bounds")),
        meta_len,
        table_len,
        payload_bytes,
        body_len,
    };
    header.check(limits)?;
    Ok(header)
}

/// An inline frame's slot bytes for `frame` (tests and fuzz seeds).
pub fn inline_frame_bytes(frame: &OutgoingFrame) -> Vec<u8> {
    let mut bytes = encode_inline_head(&frame.header).to_vec();
    bytes.extend_from_slice(&frame.to_vec()[HEADER_BYTES..]);
    bytes
}

/// Writes an inline frame to a slot's bytes at `dst`: its compact head,
/// the body's head (metadata and table), then the payloads, padded.
///
/// # Safety
/// `inline_len(header)` writable bytes at `dst` that nobody else reads or
/// writes meanwhile; `header` was made for `meta` and `payloads`.
pub(super) unsafe fn write_inline(dst: *mut u8, header: &FrameHeader, meta: &[u8], payloads: &[Tensor]) {
    let payload_offset = header.layout().payload_offset as usize;
    // SAFETY: the caller's bytes: the compact head, the body's head and
    // the padded payloads add up to `inline_len(header)`.
    unsafe {
        std::ptr::copy_nonoverlapping(encode_inline_head(header).as_ptr(), dst, INLINE_HEAD_BYTES);
        crate::net::frame::write_body_head(header, meta, payloads, dst.add(INLINE_HEAD_BYTES));
        write_payloads(payloads, dst.add(INLINE_HEAD_BYTES + payload_offset), header.payload_bytes);
    }
}

/// Copies the first `len` bytes of `frame` to `dst`: the whole frame, or a
/// split frame's head (its head and the payloads before its first span,
/// padded).
///
/// # Safety
/// `len` writable bytes at `dst` that nobody else reads or writes
/// meanwhile; `len` ends between two of the frame's slices
/// (`ShmChannel::split_plan` for a split head).
pub(super) unsafe fn write_frame(frame: &OutgoingFrame, mut dst: *mut u8, len: u64) {
    let head = frame.head();
    if head.len() as u64 == len {
        // The head alone (a frame without payloads, or a split head that
        // ends with it): one copy, without listing the frame's slices.
        // SAFETY: the caller's `len` bytes at `dst`.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len()) };
        return;
    }
    let mut written = 0u64;
    for slice in frame.io_slices().iter() {
        if written == len {
            break;
        }
        written += slice.len() as u64;
        assert!(written <= len, "the bytes written end between two of the frame's slices");
        // SAFETY: inside the caller's `len` bytes (checked just above).
        unsafe {
            std::ptr::copy_nonoverlapping(slice.as_ptr(), dst, slice.len());
            dst = dst.add(slice.len());
        }
    }
    assert_eq!(written, len, "the frame's slices reach the bytes asked for");
}

/// Copies `payloads`, each padded to the payload alignment with zeros,
/// to `dst`.
///
/// # Safety
/// `len` writable bytes at `dst`, which the payloads' padded lengths sum
/// to, that nobody else reads or writes meanwhile.
pub(super) unsafe fn write_payloads(payloads: &[Tensor], mut dst: *mut u8, len: u64) {
    let mut written = 0u64;
    for payload in payloads {
        let bytes = payload.as_bytes();
        let padded = crate::net::frame::padded_payload_len(bytes.len() as u64).expect("checked when planned");
        written += padded;
        assert!(written <= len, "the payloads fill the bytes given");
        // SAFETY: inside the caller's `len` bytes (checked just above).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
            std::ptr::write_bytes(dst.add(bytes.len()), 0, padded as usize - bytes.len());
            dst = dst.add(padded as usize);
        }
    }
    assert_eq!(written, len, "the payloads fill the bytes given");
}

/// Whether every payload past the first `in_head` payload bytes (copied
/// with a split frame's head) is floating point, the one kind whose bytes a
/// peer may still change once they are read in place: any bit pattern is a
/// valid value, and no kernel turns one into an address. Strings (offsets),
/// bools (a byte other than 0 or 1 is undefined behaviour once checked) and
/// integers (indices a kernel bounds-checks, then uses) are copied, and so
/// is everything behind a table that does not scan (`parse` then reports
/// what is wrong).
pub(super) fn payloads_may_stay_in_the_ring(table: &[u8], count: u32, in_head: usize) -> bool {
    let mut at = 0usize;
    // Payload bytes before this entry's: those inside the head were copied
    // with it, so only the span's must be floats.
    let mut before = 0u64;
    for _ in 0..count {
        let Some(entry) = table.get(at..at + 16) else {
            return false;
        };
        let byte_len = u64::from_le_bytes(entry[8..16].try_into().expect("8 bytes"));
        let in_span = before >= in_head as u64;
        if in_span && !matches!(DType::from_code(entry[0]), Some(DType::F32 | DType::F64)) {
            return false;
        }
        let Some(padded) = crate::net::frame::padded_payload_len(byte_len) else { return false };
        before = before.saturating_add(padded);
        at += 16 + 8 * entry[1] as usize;
    }
    true
}
