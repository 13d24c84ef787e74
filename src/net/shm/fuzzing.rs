//! A hostile peer driven by bytes, for the `shm_ring` fuzz target: it
//! writes anything anywhere in a channel's region (slots, publish words,
//! data, both directions' index and holds lines) between our polls and
//! sends, and every frame we accept is read whole. Nothing may panic, hang
//! or touch memory outside the region (the fuzzer's sanitizer watches).
//!
//! Owns nothing the channel uses; test support only, hidden from the docs.

use super::region::{Direction, Layout, SharedRegion};
use super::ring::{Descriptor, INLINE_BYTES, RingMemory};
use super::{Polled, ShmChannel, Side};
use crate::net::frame::{FrameKind, FrameLimits, OutgoingFrame};
use crate::tensor::Tensor;
use crate::tensor::placement::place_outputs;
use std::time::Duration;

const SLOTS: u32 = 8;
const RING_BYTES: u64 = 512 << 10;

/// What a script made the channel do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Frames the channel accepted from the peer.
    pub accepted: usize,
    /// Frames it sent whose tensor was written in the peer's ring first.
    pub sent_in_place: u64,
}

/// Runs `script` against a fresh server-side channel. Each step takes an
/// opcode byte and its operands.
pub fn hostile_peer(script: &[u8]) -> Outcome {
    let layout = Layout::new(SLOTS, RING_BYTES).expect("a valid layout");
    let Ok((region, fd)) = SharedRegion::create(layout, [1, 2]) else {
        return Outcome { accepted: 0, sent_in_place: 0 };
    };
    let Ok(ours) = SharedRegion::open(&fd, layout, [1, 2]) else {
        return Outcome { accepted: 0, sent_in_place: 0 };
    };
    let limits = FrameLimits { max_frame_bytes: 1 << 20, max_payloads: 8 };
    let channel = ShmChannel::new(ours, Side::Server, limits, Duration::ZERO);
    let total = layout.total as usize;
    let base = region.base();
    let mut kept = Vec::new();
    let mut placed_kept = Vec::new();
    let mut accepted = 0;
    let mut bytes = script;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = (bytes.get(..n)?, bytes.get(n..)?);
        bytes = rest;
        Some(head)
    };
    while let Some(&[op]) = take(1) {
        match op % 4 {
            // Scribble: up to 64 bytes at any offset of the region.
            0 => {
                let Some(at) = take(4) else { break };
                let Some(&[len]) = take(1) else { break };
                let Some(data) = take(usize::from(len % 64)) else { break };
                let offset = u32::from_le_bytes(at.try_into().expect("4 bytes")) as usize % total;
                let len = data.len().min(total - offset);
                // SAFETY: `[offset, offset + len)` lies inside the region
                // (the other mapping of the same file), which outlives this.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(offset), len) };
            }
            // Publish slot `index` with an arbitrary descriptor word set.
            1 => {
                let Some(words) = take(33) else { break };
                let memory = region.ring(Direction::ClientToServer);
                let index = u64::from(words[32]);
                let word = |i: usize| u64::from_le_bytes(words[8 * i..8 * i + 8].try_into().expect("8 bytes"));
                // Kinds 0 to 7, a line frame's with up to 63 bytes.
                let descriptor = Descriptor {
                    kind: (word(0) % 8) as u32 | (word(0) as u32 & 0x3f00),
                    // A line frame's head (frame kind, flags, method).
                    reserved: (word(0) >> 32) as u32,
                    position: word(1) % (4 * RING_BYTES),
                    len: word(2) % (2 * RING_BYTES),
                    reserved2: word(3) % 512,
                };
                publish_raw(memory, index, descriptor, &[]);
            }
            // Poll once; keep the frame or let it go.
            2 => {
                let Some(&[keep]) = take(1) else { break };
                let mut rx = channel.rx.lock();
                if let Ok(Polled::Frame(frame)) = channel.poll(&mut rx) {
                    accepted += 1;
                    let mut sum = frame.meta_bytes().iter().fold(0u8, |a, b| a ^ b);
                    for tensor in frame.payloads() {
                        sum ^= tensor.as_bytes().iter().fold(0u8, |a, b| a ^ b);
                    }
                    std::hint::black_box(sum);
                    if keep % 2 == 1 && kept.len() < 2 * super::ring::HOLDS {
                        kept.push(frame);
                    }
                }
                if keep % 3 == 0 {
                    kept.clear();
                }
            }
            // Send a frame of `n % 48` KiB to the peer, whose index and
            // holds lines it may have scribbled on; with the top bit, a
            // tensor of 64 to 124 KiB written in the peer's ring first
            // (kept here for a while when bit 6 is set too, sent after a
            // small integer payload when bit 5 is, and with a second one
            // when bit 4 is: written in place too, or with bit 3 as well,
            // not, so the sender copies it into a span of its own; with
            // bit 2, under metadata too long for a slot, so the head
            // starts the first span).
            _ => {
                let Some(&[n]) = take(1) else { break };
                let tensor = if n & 0x80 == 0 {
                    Tensor::build::<f32>([usize::from(n % 48) * 256], |s| s.fill(1.0))
                } else {
                    let elements = (16 + usize::from(n % 16)) * 1024;
                    match channel.output_placement() {
                        Some(placement) => {
                            place_outputs(&*placement, || Tensor::build::<f32>([elements], |s| s.fill(f32::from(n))))
                        }
                        None => break,
                    }
                };
                let Ok(tensor) = tensor else { break };
                let mut payloads = match n & 0xa0 == 0xa0 {
                    true => vec![Tensor::scalar(i64::from(n)), tensor.clone()],
                    false => vec![tensor.clone()],
                };
                if n & 0x90 == 0x90 {
                    let build = || Tensor::build::<f32>([16 * 1024], |s| s.fill(0.5));
                    let second = match (n & 0x08 == 0, channel.output_placement()) {
                        (true, Some(placement)) => place_outputs(&*placement, build),
                        (true, None) => break,
                        (false, _) => build(),
                    };
                    let Ok(second) = second else { break };
                    payloads.push(second);
                }
                let meta: &[u8] = if n & 0x84 == 0x84 { &[b'm'; 512] } else { b"m" };
                if let Ok(frame) = OutgoingFrame::new(FrameKind::Response, 1, 1, meta, &payloads, &limits) {
                    let _ = channel.try_place(&frame);
                }
                if n & 0xc0 == 0xc0 && placed_kept.len() < 4 {
                    placed_kept.push(tensor);
                } else if n & 0xc0 == 0x80 {
                    placed_kept.clear();
                }
            }
        }
    }
    drop(kept);
    drop(placed_kept);
    Outcome { accepted, sent_in_place: channel.stats().frames_in_place }
}

/// Writes slot `index` of `memory` raw (descriptor, then `inline` bytes),
/// as a hostile producer may, and publishes it.
pub(crate) fn publish_raw(memory: RingMemory, index: u64, descriptor: Descriptor, inline: &[u8]) {
    let inline = &inline[..inline.len().min(INLINE_BYTES)];
    let slot = memory.slots_base.wrapping_add((index & (memory.slots - 1)) as usize);
    // SAFETY: the slot lies in the region (masked index); the consumer reads
    // it only after the publish word's store below.
    unsafe {
        std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).descriptor), descriptor);
        std::ptr::copy_nonoverlapping(inline.as_ptr(), std::ptr::addr_of_mut!((*slot).inline).cast(), inline.len());
        (*slot).seq.store(index + 1, std::sync::atomic::Ordering::Release);
    }
}

/// Writes slot `index` of `memory` as a line frame of `bytes` whose kind
/// word is `kind_word` (a good one is `DESC_LINE | len << 8`), as a
/// hostile producer may, and publishes it.
#[cfg(test)]
pub(crate) fn publish_raw_line(memory: RingMemory, index: u64, kind_word: u32, bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(super::ring::LINE_BYTES)];
    let slot = memory.slots_base.wrapping_add((index & (memory.slots - 1)) as usize);
    // SAFETY: the slot lies in the region (masked index), and a line's
    // bytes lie in its first 64; the consumer reads them only after the
    // publish word's store below.
    unsafe {
        std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).descriptor.kind), kind_word);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), slot.cast::<u8>().add(12), bytes.len());
        (*slot).seq.store(index + 1, std::sync::atomic::Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Script steps writing `bytes` at `offset` of the region.
    fn scribble(script: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
        for (i, chunk) in bytes.chunks(63).enumerate() {
            script.push(0);
            script.extend_from_slice(&((offset + 63 * i) as u32).to_le_bytes());
            script.push(chunk.len() as u8);
            script.extend_from_slice(chunk);
        }
    }

    fn publish(script: &mut Vec<u8>, index: u8, kind: u64, position: u64, len: u64, head_len: u64) {
        script.push(1);
        for word in [kind, position, len, head_len] {
            script.extend_from_slice(&word.to_le_bytes());
        }
        script.push(index);
    }

    /// The seed script: an inline frame and a data-ring frame accepted,
    /// sends to a peer whose head we then scribble on, garbage published.
    fn seed() -> Vec<u8> {
        let limits = FrameLimits::default();
        let small = crate::net::shm::inline_frame_bytes(
            &OutgoingFrame::new(FrameKind::Request, 1, 7, b"hello", &[], &limits).unwrap(),
        );
        let tensor = Tensor::build::<f32>([2048], |s| s.fill(2.0)).unwrap();
        let large = OutgoingFrame::new(FrameKind::Request, 1, 8, b"big", &[tensor], &limits).unwrap().to_vec();
        let slots = 4096;
        let data = slots + 2 * (SLOTS as usize * super::super::ring::SLOT_BYTES).next_multiple_of(4096);
        let mut script = Vec::new();
        scribble(&mut script, slots + 40, &small);
        publish(&mut script, 0, u64::from(super::super::ring::DESC_INLINE), 0, small.len() as u64, 0);
        script.extend_from_slice(&[2, 0]); // poll, drop
        scribble(&mut script, data, &large);
        publish(&mut script, 1, u64::from(super::super::ring::DESC_FRAME), 0, large.len() as u64, 0);
        script.extend_from_slice(&[2, 1]); // poll, keep
        // A split frame: its head in slot 2, its payload 64 KiB into the
        // data ring, past the kept frame.
        let tensor = Tensor::build::<f32>([2048], |s| s.fill(3.0)).unwrap();
        let split =
            OutgoingFrame::new(FrameKind::Request, 1, 9, b"split", std::slice::from_ref(&tensor), &limits).unwrap();
        scribble(&mut script, slots + 2 * super::super::ring::SLOT_BYTES + 40, split.head());
        scribble(&mut script, data + (64 << 10), tensor.as_bytes());
        let head_len = split.head().len() as u64;
        publish(&mut script, 2, u64::from(super::super::ring::DESC_SPLIT), 64 << 10, 8192, head_len);
        script.extend_from_slice(&[2, 1]); // poll, keep
        // A split frame whose head carries a small integer payload before
        // the one in its span, 96 KiB into the data ring.
        let lead = Tensor::scalar(5i64);
        let both = OutgoingFrame::new(FrameKind::Request, 1, 10, b"lead", &[lead, tensor.clone()], &limits).unwrap();
        let head = both.to_vec()[..both.head().len() + 64].to_vec();
        scribble(&mut script, slots + 3 * super::super::ring::SLOT_BYTES + 40, &head);
        scribble(&mut script, data + (96 << 10), tensor.as_bytes());
        publish(&mut script, 3, u64::from(super::super::ring::DESC_SPLIT), 96 << 10, 8192, head.len() as u64);
        script.extend_from_slice(&[2, 0]); // poll, drop
        // A split frame over two spans (slots 4 and 5), at 128 and 160 KiB.
        let two =
            OutgoingFrame::new(FrameKind::Request, 1, 11, b"two", &[tensor.clone(), tensor.clone()], &limits).unwrap();
        scribble(&mut script, slots + 5 * super::super::ring::SLOT_BYTES + 40, two.head());
        scribble(&mut script, data + (128 << 10), tensor.as_bytes());
        scribble(&mut script, data + (160 << 10), tensor.as_bytes());
        publish(&mut script, 4, u64::from(super::super::ring::DESC_SPAN), 128 << 10, 8192, 0);
        publish(&mut script, 5, u64::from(super::super::ring::DESC_SPLIT), 160 << 10, 8192, two.head().len() as u64);
        script.extend_from_slice(&[2, 1]); // poll, keep
        // Sends written in place: one kept, one after a small payload
        // (which travels in its slot), one beside a second tensor written
        // in place, one beside a second that was not (copied into a span
        // of its own).
        script.extend_from_slice(&[3, 0xc7, 3, 0xa1, 3, 0x92, 3, 0x99]);
        script.extend_from_slice(&[3, 4, 3, 40, 3, 1]); // sends of 4, 40 and 1 KiB
        scribble(&mut script, 2048 + 64, &u64::MAX.to_le_bytes()); // the peer's desc_head
        script.extend_from_slice(&[3, 2, 3, 47]);
        // A line frame: its head and 16 bytes of metadata in the
        // descriptor's words.
        let line_word = u64::from(super::super::ring::DESC_LINE | 28 << 8);
        let head_word = u64::from(FrameKind::Request as u8) | 3 << 16;
        publish(&mut script, 6, line_word | head_word << 32, 77, 0x1122, 0x3344);
        script.extend_from_slice(&[2, 0]); // poll, drop
        publish(&mut script, 7, 9, 3, 5, 0);
        script.extend_from_slice(&[2, 3]);
        script
    }

    #[test]
    fn a_scripted_hostile_peer_gets_good_frames_accepted_and_nothing_else() {
        let script = seed();
        assert_eq!(hostile_peer(&script), Outcome { accepted: 6, sent_in_place: 4 });
        if let Ok(dir) = std::env::var("RINGFLOW_WRITE_SEEDS") {
            std::fs::write(std::path::Path::new(&dir).join("scripted"), &script).unwrap();
        }
        // Every prefix runs to its end without panicking.
        for cut in (0..script.len()).step_by(7) {
            hostile_peer(&script[..cut]);
        }
    }

    /// Every committed seed (crashes the fuzzer found among them) runs
    /// to its end.
    #[test]
    fn every_seed_runs_clean() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/shm_ring");
        let mut ran = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            hostile_peer(&std::fs::read(entry.unwrap().path()).unwrap());
            ran += 1;
        }
        assert!(ran >= 2, "{ran} seeds in {}", dir.display());
    }
}
