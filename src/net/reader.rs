//! [`FrameReader`]: turns a byte stream into [`ReceivedFrame`]s without
//! copying payloads, and tells the I/O layer where the next bytes go.
//!
//! Owns: the connection's receive buffers. Small frames are read in bulk
//! into a 64-byte aligned chunk and parsed in place there (one `recv` may
//! bring several); a frame that does not fit the chunk's free space gets a
//! buffer of exactly its body's size, and the rest of it is received
//! directly into that buffer. Only the part of such a frame that an earlier
//! bulk read already placed in the chunk is moved (at most one chunk's free
//! space, usually just the header and metadata); every later byte is written
//! once, by the kernel, where the tensors will read it.
//!
//! Must not perform I/O or know about clocks: the I/O layer calls
//! [`FrameReader::recv_space`], writes there, and reports with
//! [`FrameReader::commit`].
//!
//! Invariant that makes the shared-buffer writes sound: bytes before
//! `filled` are never written again (frames and tensors may read them);
//! bytes from `filled` on are referenced by nobody and are where the kernel
//! writes.

use super::frame::{FrameError, FrameHeader, FrameLimits, HEADER_BYTES, ReceivedFrame};
use crate::alloc::{IoBuf, Region};
use std::sync::Arc;

/// A frame too large for the chunk, being received into its own buffer:
/// its payloads alone (metadata and table stay in place in the chunk,
/// `head`), or its whole body when even the metadata is large.
struct LargeBody {
    header: FrameHeader,
    /// The chunk and body offset holding metadata and table, if split.
    head: Option<(Arc<IoBuf>, usize)>,
    buf: Arc<IoBuf>,
    filled: usize,
    /// Bytes `buf` receives in all.
    target: usize,
}

pub struct FrameReader {
    limits: FrameLimits,
    chunk_bytes: usize,
    region: Option<Region>,
    chunk: Arc<IoBuf>,
    /// First byte not yet handed out as part of a frame.
    start: usize,
    /// End of received bytes in `chunk`.
    filled: usize,
    large: Option<LargeBody>,
    /// Largest single receive the I/O layer is asked for (io_uring lengths
    /// are 32-bit).
    max_recv_bytes: usize,
}

impl FrameReader {
    /// `chunk_bytes` is rounded up to a multiple of 64; chunks come from
    /// `region` while it has free slots of that size, else from the heap.
    pub fn new(limits: FrameLimits, chunk_bytes: usize, region: Option<Region>) -> Result<FrameReader, FrameError> {
        let chunk_bytes = chunk_bytes.max(4 * HEADER_BYTES).next_multiple_of(HEADER_BYTES);
        let region = region.filter(|r| r.slot_bytes() == chunk_bytes);
        let chunk = Arc::new(Self::new_chunk(chunk_bytes, region.as_ref())?);
        Ok(FrameReader {
            limits,
            chunk_bytes,
            region,
            chunk,
            start: 0,
            filled: 0,
            large: None,
            max_recv_bytes: 1 << 30,
        })
    }

    fn new_chunk(chunk_bytes: usize, region: Option<&Region>) -> Result<IoBuf, FrameError> {
        if let Some(buf) = region.and_then(Region::alloc) {
            return Ok(buf);
        }
        IoBuf::zeroed(chunk_bytes).map_err(|e| FrameError::Alloc(chunk_bytes as u64, e.to_string()))
    }

    /// The region receive chunks come from, if any.
    pub fn region(&self) -> Option<&Region> {
        self.region.as_ref()
    }

    /// True while receiving a large frame's body, whose remaining length
    /// is exactly what [`recv_space`](Self::recv_space) offers.
    pub fn expects_exact(&self) -> bool {
        self.large.is_some()
    }

    /// True when no partial frame is buffered (a clean point to stop).
    pub fn is_idle(&self) -> bool {
        self.large.is_none() && self.start == self.filled
    }

    /// The next complete frame among the received bytes, if any.
    pub fn next_frame(&mut self) -> Result<Option<ReceivedFrame>, FrameError> {
        if let Some(large) = &self.large {
            if large.filled == large.target {
                let large = self.large.take().expect("checked above");
                return match large.head {
                    Some((head, body_offset)) => {
                        ReceivedFrame::parse_split(large.header, head, body_offset, 0, large.buf, 0)
                    }
                    None => ReceivedFrame::parse(large.header, large.buf, 0),
                }
                .map(Some);
            }
            return Ok(None);
        }
        let available = self.filled - self.start;
        if available < HEADER_BYTES {
            return Ok(None);
        }
        // SAFETY: [start, filled) was received and is never written again.
        let header_bytes = unsafe { self.chunk.slice(self.start, HEADER_BYTES) };
        let header = FrameHeader::decode(header_bytes, &self.limits)?;
        let frame_len = header.frame_len();
        if available as u64 >= frame_len {
            let body_offset = self.start + HEADER_BYTES;
            self.start += frame_len as usize;
            return ReceivedFrame::parse(header, self.chunk.clone(), body_offset).map(Some);
        }
        if (self.start as u64).saturating_add(frame_len) <= self.chunk.len() as u64 {
            return Ok(None); // The rest will land in place.
        }
        if frame_len <= (self.chunk_bytes / 2) as u64 {
            // A small frame straddling the chunk's end: move its beginning
            // into a fresh chunk.
            self.move_partial_to_fresh_chunk()?;
            return Ok(None);
        }
        // A large frame. When its metadata and table are small they stay in
        // place in the chunk and only the payloads get a buffer of their own
        // (so a received tensor costs its own size in memory, no more);
        // otherwise the whole body does.
        let head_len = HEADER_BYTES + header.layout().payload_offset as usize;
        if header.payload_bytes > 0 && head_len <= self.chunk_bytes / 2 {
            if available < head_len {
                if self.start + head_len > self.chunk.len() {
                    self.move_partial_to_fresh_chunk()?;
                }
                return Ok(None); // The metadata first, in the chunk.
            }
            let target = header.payload_bytes as usize;
            let buf = IoBuf::for_receive(target).map_err(|e| FrameError::Alloc(header.payload_bytes, e.to_string()))?;
            let prefix = available - head_len;
            // SAFETY: source is received, immutable chunk bytes; destination
            // is the fresh buffer, exclusively ours, with room for `prefix`
            // < `target` bytes (the frame did not fit what was received).
            unsafe {
                std::ptr::copy_nonoverlapping(self.chunk.as_ptr().add(self.start + head_len), buf.as_mut_ptr(), prefix)
            };
            self.large = Some(LargeBody {
                header,
                head: Some((self.chunk.clone(), self.start + HEADER_BYTES)),
                buf: Arc::new(buf),
                filled: prefix,
                target,
            });
            self.start = self.filled;
            return Ok(None);
        }
        let body_len = header.body_len as usize;
        let buf = IoBuf::for_receive(body_len).map_err(|e| FrameError::Alloc(header.body_len, e.to_string()))?;
        let prefix = available - HEADER_BYTES;
        // SAFETY: source is received, immutable chunk bytes; destination is
        // the fresh buffer, exclusively ours, with room for `prefix` <
        // `body_len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.chunk.as_ptr().add(self.start + HEADER_BYTES), buf.as_mut_ptr(), prefix)
        };
        self.start = self.filled;
        self.large = Some(LargeBody { header, head: None, buf: Arc::new(buf), filled: prefix, target: body_len });
        Ok(None)
    }

    fn move_partial_to_fresh_chunk(&mut self) -> Result<(), FrameError> {
        let fresh = Self::new_chunk(self.chunk_bytes, self.region.as_ref())?;
        let partial = self.filled - self.start;
        // SAFETY: source is received chunk bytes; destination is a fresh
        // buffer of `chunk_bytes` >= `partial`, exclusively ours.
        unsafe { std::ptr::copy_nonoverlapping(self.chunk.as_ptr().add(self.start), fresh.as_mut_ptr(), partial) };
        self.chunk = Arc::new(fresh);
        self.start = 0;
        self.filled = partial;
        Ok(())
    }

    /// Where the next received bytes go, and how many may go there. Never
    /// empty. Call [`next_frame`](Self::next_frame) until it returns `None`
    /// first, so that a complete frame is never left waiting behind a read.
    pub fn recv_space(&mut self) -> Result<(*mut u8, usize), FrameError> {
        if let Some(large) = &self.large {
            let left = large.target - large.filled;
            debug_assert!(left > 0, "complete large frames are taken by next_frame");
            // SAFETY (pointer arithmetic): `filled` < buffer length.
            let ptr = large.buf.as_mut_ptr().wrapping_add(large.filled);
            return Ok((ptr, left.min(self.max_recv_bytes)));
        }
        if self.start == self.filled {
            // Nothing pending: reuse the chunk from its start when no frame
            // still refers to it, else take a fresh one once it runs low.
            if Arc::strong_count(&self.chunk) == 1 {
                self.start = 0;
                self.filled = 0;
            } else if self.chunk.len() - self.filled < self.chunk_bytes / 4 || self.filled % HEADER_BYTES != 0 {
                // (After a large frame `filled` may be unaligned; frames must
                // start 64-byte aligned for their payloads to be.)
                self.chunk = Arc::new(Self::new_chunk(self.chunk_bytes, self.region.as_ref())?);
                self.start = 0;
                self.filled = 0;
            }
        } else if self.filled == self.chunk.len() {
            self.move_partial_to_fresh_chunk()?;
        }
        let ptr = self.chunk.as_mut_ptr().wrapping_add(self.filled);
        Ok((ptr, self.chunk.len() - self.filled))
    }

    /// Records that `n` bytes were written at the last `recv_space`.
    pub fn commit(&mut self, n: usize) {
        match &mut self.large {
            Some(large) => {
                assert!(large.filled + n <= large.target, "overlong commit");
                large.filled += n;
            }
            None => {
                assert!(self.filled + n <= self.chunk.len(), "overlong commit");
                self.filled += n;
            }
        }
    }

    /// Copies `bytes` in as if received (tests, fuzzing and in-memory peers).
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<ReceivedFrame>, FrameError> {
        let mut frames = Vec::new();
        loop {
            while let Some(frame) = self.next_frame()? {
                frames.push(frame);
            }
            if bytes.is_empty() {
                return Ok(frames);
            }
            let (ptr, space) = self.recv_space()?;
            let n = space.min(bytes.len());
            // SAFETY: `recv_space` returned `space` writable bytes nobody
            // reads; we write `n` <= `space` of them.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, n) };
            self.commit(n);
            bytes = &bytes[n..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::frame::{FrameKind, OutgoingFrame};
    use crate::tensor::Tensor;

    fn frame_bytes(id: u64, floats: usize) -> (Vec<u8>, Tensor) {
        frame_bytes_with_meta(id, floats, b"m")
    }

    fn frame_bytes_with_meta(id: u64, floats: usize, meta: &[u8]) -> (Vec<u8>, Tensor) {
        let t =
            Tensor::build::<f32>([floats], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = (i as u64 + id) as f32))
                .unwrap();
        let f = OutgoingFrame::new(FrameKind::Request, 3, id, meta, std::slice::from_ref(&t), &FrameLimits::default())
            .unwrap();
        (f.to_vec(), t)
    }

    #[test]
    fn stream_split_anywhere_yields_the_same_frames_in_place() {
        // Small frames, frames larger than the chunk (payloads get their own
        // buffer, metadata stays in the chunk), and one whose metadata alone
        // is too large for the chunk (the whole body gets a buffer).
        let sizes = [1usize, 10, 100, 1000, 5000, 40, 3, 700];
        let big_meta = vec![b'm'; 3000];
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let meta: &[u8] = if i == 7 { &big_meta } else { b"m" };
            let (bytes, t) = frame_bytes_with_meta(i as u64, n, meta);
            stream.extend_from_slice(&bytes);
            expected.push(t);
        }
        for piece in [1usize, 7, 64, 333, 4096, stream.len()] {
            let mut reader = FrameReader::new(FrameLimits::default(), 4096, None).unwrap();
            let mut got = Vec::new();
            for part in stream.chunks(piece) {
                got.extend(reader.feed(part).unwrap());
            }
            assert!(reader.is_idle());
            assert_eq!(got.len(), sizes.len(), "piece {piece}");
            for (i, (frame, want)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(frame.header.request_id, i as u64);
                let want_meta: &[u8] = if i == 7 { &big_meta } else { b"m" };
                assert_eq!(frame.meta_bytes(), want_meta);
                if sizes[i] == 5000 {
                    assert!(!Arc::ptr_eq(frame.buffer(), frame.meta_buffer()));
                    assert_eq!(frame.buffer().len(), 20_032, "payload buffer holds payloads only");
                }
                let t = &frame.payloads()[0];
                assert!(t.bit_eq(want), "piece {piece} frame {i}");
                assert!(frame.buffer().contains(t.data_ptr()));
                assert_eq!(t.data_ptr() as usize % 64, 0);
            }
        }
    }

    #[test]
    fn idle_chunk_is_reused_when_frames_are_dropped() {
        let mut reader = FrameReader::new(FrameLimits::default(), 4096, None).unwrap();
        let (bytes, _) = frame_bytes(1, 4);
        let first = reader.feed(&bytes).unwrap().remove(0);
        let first_ptr = first.payloads()[0].data_ptr();
        drop(first);
        let second = reader.feed(&bytes).unwrap().remove(0);
        assert_eq!(second.payloads()[0].data_ptr(), first_ptr);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut reader = FrameReader::new(FrameLimits::default(), 4096, None).unwrap();
        assert!(matches!(reader.feed(&[0xAB; 200]), Err(FrameError::BadMagic(_))));
    }
}
