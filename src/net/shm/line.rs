//! Line frames: a frame of metadata alone, at most [`LINE_META_BYTES`] of
//! it, carried in the one cache line of a slot the reader spins on (a
//! ping, an empty reply, most acknowledgements).
//!
//! Owns: the line head's format, a line frame as the words a slot's line
//! is written and read in ([`ring::LineWords`]), and a received one as a
//! [`LineFrame`]: a checked copy on the reader's stack, its metadata
//! aligned for an archived message to be read in place. Must not touch the
//! ring's indices (`ring.rs` publishes and releases the slot) or know what
//! a request means.
//!
//! Why a value of its own and not a [`ReceivedFrame`]: a received frame
//! holds its bytes in a shared buffer (a reference count up and down per
//! frame) and is 96 bytes to move; a line frame is 64 bytes that a small
//! call's two ends answer or complete from where it lies (the small-call
//! lane in `rpc`). Whoever wants a frame after all converts it
//! ([`LineFrame::into_received`]).
//!
//! Why words: a line crosses as seven 8-byte loads on one side and seven
//! stores on the other, and its head's fields come out of and go into
//! those words by shifts. Copying it as bytes took a load and a store per
//! byte, and bytes stored one at a time and then read back wide (or the
//! reverse) wait for failed store forwarding: together most of a line
//! frame's cost at each end (`ringflow bench pingpong --transport shm`).

use super::ring::{self, LineWords};
use crate::alloc::IoBuf;
use crate::net::frame::{FrameError, FrameHeader, FrameKind, FrameLimits, HEADER_BYTES, ReceivedFrame};
use std::sync::Arc;

/// Bytes of a line frame's head: what a frame of metadata alone needs of
/// the 64-byte header (no payloads, no table; the metadata's length is
/// the line's), so a request or reply with up to
/// [`LINE_META_BYTES`] of metadata crosses in one cache line.
///
/// ```text
/// kind u8 | flags u8 | method u16 | request_id u64 | metadata
/// ```
pub const LINE_HEAD_BYTES: usize = 12;

/// The most metadata a line frame carries.
pub const LINE_META_BYTES: usize = ring::LINE_BYTES - LINE_HEAD_BYTES;

/// Words of a line's metadata: the line words after the kind word and the
/// head (which fill the first two).
const META_WORDS: usize = LINE_META_BYTES / 8;

const _: () = assert!(META_WORDS * 8 == LINE_META_BYTES && META_WORDS + 2 == ring::LINE_WORDS);
const _: () = assert!(LINE_META_BYTES <= u8::MAX as usize);

/// A slot's line bytes for a frame with this header, when it is one of
/// metadata alone that fits a line.
pub(crate) fn line_len(header: &FrameHeader) -> Option<usize> {
    let fits = header.payload_count == 0 && header.table_len == 0 && header.meta_len <= LINE_META_BYTES as u64;
    fits.then_some(LINE_HEAD_BYTES + header.meta_len as usize)
}

/// Whether every line frame fits frames of `limits` (a line frame is at
/// most a header and one payload alignment of metadata).
pub(crate) fn line_fits(limits: &FrameLimits) -> bool {
    HEADER_BYTES as u64 + crate::net::frame::PAYLOAD_ALIGN as u64 <= limits.max_frame_bytes
}

/// The line words of a frame of `meta`: the kind word's bytes left for the
/// ring ([`ring::Producer::publish_line_words`] fills them), then the head
/// (kind, flags, method, request id, little-endian), then the metadata.
#[inline]
pub(crate) fn line_words(kind: FrameKind, method: u16, request_id: u64, meta: &LineMeta) -> LineWords {
    let [m0, m1] = method.to_le_bytes();
    let head = u64::from_ne_bytes([0, 0, 0, 0, kind as u8, 0, m0, m1]);
    let mut words = [0u64; ring::LINE_WORDS];
    words[0] = head;
    words[1] = u64::from_ne_bytes(request_id.to_le_bytes());
    words[2..].copy_from_slice(&meta.words);
    words
}

/// Up to [`LINE_META_BYTES`] of metadata, held by value as words at the
/// alignment of a frame's body, so an archived message reads in place
/// from it.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct LineMeta {
    /// The bytes in memory order; those past `len` are never read.
    words: [u64; META_WORDS],
    len: u8,
}

impl LineMeta {
    /// `meta` copied, or `None` when it is longer than a line carries.
    #[inline]
    pub fn new(meta: &[u8]) -> Option<LineMeta> {
        if meta.len() > LINE_META_BYTES {
            return None;
        }
        let mut words = [0u64; META_WORDS];
        // SAFETY: `words` has LINE_META_BYTES bytes of room for `meta`
        // (checked above), and a fresh local does not overlap it.
        unsafe { copy_small(words.as_mut_ptr().cast(), meta) };
        Some(LineMeta { words, len: meta.len() as u8 })
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `len` <= LINE_META_BYTES bytes of `words`, which are
        // plain integers (every byte initialised), read as bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), usize::from(self.len)) }
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Copies `src` (at most a line's metadata) to `dst` in at most two
/// fixed-size copies (its first and last bytes, which may overlap),
/// inline: a call to the C library's `memcpy` for a few dozen bytes
/// costs more than the copy.
///
/// # Safety
/// `src.len()` <= [`LINE_META_BYTES`] writable bytes at `dst`, not
/// overlapping `src`.
#[inline(always)]
unsafe fn copy_small(dst: *mut u8, src: &[u8]) {
    /// The first `N` and last `N` bytes of `N..=2N`.
    ///
    /// # Safety
    /// As `copy_small`, and `N <= src.len() <= 2 * N`.
    #[inline(always)]
    unsafe fn ends<const N: usize>(dst: *mut u8, src: &[u8]) {
        let n = src.len();
        debug_assert!((N..=2 * N).contains(&n));
        // SAFETY: both copies lie within the first `n` bytes of each side.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, N);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(n - N), dst.add(n - N), N);
        }
    }
    const _: () = assert!(LINE_META_BYTES <= 64);
    debug_assert!(src.len() <= LINE_META_BYTES);
    // SAFETY: each arm's length range is its `ends`' precondition.
    unsafe {
        match src.len() {
            0 => {}
            1 => dst.write(src[0]),
            2..=3 => ends::<2>(dst, src),
            4..=7 => ends::<4>(dst, src),
            8..=15 => ends::<8>(dst, src),
            16..=31 => ends::<16>(dst, src),
            _ => ends::<32>(dst, src),
        }
    }
}

impl std::fmt::Debug for LineMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LineMeta({} B)", self.len)
    }
}

/// A line frame copied out of its slot and checked: its head's fields and
/// its metadata. Nothing in it can change once decoded (the peer may still
/// write the slot; this is a copy).
#[derive(Clone, Copy, Debug)]
pub struct LineFrame {
    pub kind: FrameKind,
    pub flags: u8,
    pub method: u16,
    pub request_id: u64,
    pub meta: LineMeta,
}

impl LineFrame {
    /// The frame a slot's line words hold, of which it claims `len`
    /// bytes: the kind must be known and the length a line's, and frames
    /// of `limits` must admit a line frame.
    #[inline]
    pub(crate) fn decode(words: &LineWords, len: usize, limits: &FrameLimits) -> Result<LineFrame, FrameError> {
        if !(LINE_HEAD_BYTES..=ring::LINE_BYTES).contains(&len) {
            return Err(FrameError::InconsistentLengths(format!("a line frame of {len} bytes")));
        }
        if !line_fits(limits) {
            let len = HEADER_BYTES as u64 + crate::net::frame::PAYLOAD_ALIGN as u64;
            return Err(FrameError::Oversized { len, max: limits.max_frame_bytes });
        }
        let [_, _, _, _, kind, flags, m0, m1] = words[0].to_ne_bytes();
        let kind = FrameKind::from_u8(kind).ok_or(FrameError::UnknownKind(kind))?;
        let mut meta = LineMeta { words: [0; META_WORDS], len: (len - LINE_HEAD_BYTES) as u8 };
        meta.words.copy_from_slice(&words[2..]);
        Ok(LineFrame {
            kind,
            flags,
            method: u16::from_le_bytes([m0, m1]),
            request_id: u64::from_le_bytes(words[1].to_ne_bytes()),
            meta,
        })
    }

    pub fn meta_bytes(&self) -> &[u8] {
        self.meta.as_bytes()
    }

    /// The header a frame of this line's content carries.
    pub fn header(&self) -> FrameHeader {
        let meta_len = self.meta_bytes().len() as u64;
        let body_len = crate::net::frame::body_layout(meta_len, 0, 0)
            .expect("a line's metadata lays out without overflow")
            .body_len;
        FrameHeader {
            kind: self.kind,
            flags: self.flags,
            method: self.method,
            payload_count: 0,
            request_id: self.request_id,
            meta_len,
            table_len: 0,
            payload_bytes: 0,
            body_len,
        }
    }

    /// This frame as a [`ReceivedFrame`], its metadata copied into `buf`,
    /// which must hold a line and which nobody else reads or writes.
    pub(crate) fn into_received(self, buf: Arc<IoBuf>) -> ReceivedFrame {
        let meta = self.meta_bytes();
        assert!(buf.len() >= LINE_META_BYTES.next_multiple_of(8), "the buffer holds a line's metadata");
        // SAFETY: `buf` holds the metadata (checked above) and the caller
        // gives us the only reference that reads or writes it.
        unsafe { std::ptr::copy_nonoverlapping(meta.as_ptr(), buf.as_mut_ptr(), meta.len()) };
        ReceivedFrame::metadata_only(self.header(), buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words_of(kind: FrameKind, method: u16, request_id: u64, meta: &[u8]) -> (LineWords, usize) {
        (line_words(kind, method, request_id, &LineMeta::new(meta).unwrap()), LINE_HEAD_BYTES + meta.len())
    }

    #[test]
    fn line_words_lay_the_head_out_as_the_wire_format_says() {
        let (words, len) = words_of(FrameKind::Response, 0x0125, 0x1122_3344_5566_7788, b"abc");
        let bytes = ring::line_bytes_of(&words);
        assert_eq!(len, 15);
        assert_eq!(bytes[0], FrameKind::Response as u8);
        assert_eq!(bytes[1], 0, "flags");
        assert_eq!(bytes[2..4], 0x0125u16.to_le_bytes());
        assert_eq!(bytes[4..12], 0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&bytes[12..15], b"abc");
    }

    #[test]
    fn a_line_decodes_to_what_was_written_and_its_metadata_is_aligned() {
        let limits = FrameLimits::default();
        for meta_len in [0, 1, 17, LINE_META_BYTES] {
            let meta: Vec<u8> = (0..meta_len as u8).collect();
            let (words, len) = words_of(FrameKind::Response, 37, 0x1122_3344_5566_7788, &meta);
            let frame = LineFrame::decode(&words, len, &limits).unwrap();
            assert_eq!((frame.kind, frame.method, frame.request_id), (FrameKind::Response, 37, 0x1122_3344_5566_7788));
            assert_eq!(frame.meta_bytes(), &meta[..]);
            assert_eq!(frame.meta_bytes().as_ptr() as usize % 16, 0);
            let header = frame.header();
            assert_eq!(line_len(&header), Some(len));
            let received = frame.into_received(Arc::new(IoBuf::for_receive(64).unwrap()));
            assert_eq!((received.meta_bytes(), received.header), (&meta[..], header));
        }
    }

    #[test]
    fn a_line_with_a_bad_length_or_kind_or_over_the_limits_is_refused() {
        let limits = FrameLimits::default();
        let (mut words, len) = words_of(FrameKind::Request, 64, 1, b"x");
        for bad in [0, LINE_HEAD_BYTES - 1, ring::LINE_BYTES + 1] {
            assert!(
                matches!(LineFrame::decode(&words, bad, &limits), Err(FrameError::InconsistentLengths(_))),
                "{bad}"
            );
        }
        let tight = FrameLimits { max_frame_bytes: HEADER_BYTES as u64, ..limits };
        assert!(matches!(LineFrame::decode(&words, len, &tight), Err(FrameError::Oversized { .. })));
        let mut head = words[0].to_ne_bytes();
        head[4] = 0xee;
        words[0] = u64::from_ne_bytes(head);
        assert!(matches!(LineFrame::decode(&words, len, &limits), Err(FrameError::UnknownKind(0xee))));
    }

    #[test]
    fn line_meta_holds_every_length_a_line_carries_and_refuses_more() {
        let source: Vec<u8> = (1..=LINE_META_BYTES as u8 + 1).collect();
        for len in 0..=LINE_META_BYTES {
            assert_eq!(LineMeta::new(&source[..len]).unwrap().as_bytes(), &source[..len], "{len} bytes");
        }
        assert!(LineMeta::new(&source).is_none());
    }
}
