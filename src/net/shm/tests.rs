//! The channel against a hostile producer: garbage written straight into
//! the shared ring is refused, and nothing outside the ring is read.

use super::region::{Direction, Layout, SharedRegion};
use super::ring::Producer;
use super::*;
use crate::net::frame::{FrameKind, FrameLimits, OutgoingFrame};
use crate::tensor::Tensor;

/// A server-side channel over a fresh region, and a raw producer for the
/// client-to-server direction (the hostile peer's pen).
fn hostile_pair(capacity: u64) -> (ShmChannel, Producer, SharedRegion) {
    let layout = Layout::new(8, capacity).unwrap();
    let (region, fd) = SharedRegion::create(layout, [7, 7]).unwrap();
    let server_view = SharedRegion::open(&fd, layout, [7, 7]).unwrap();
    let channel = ShmChannel::new(server_view, Side::Server, FrameLimits::default());
    // SAFETY: the region outlives the producer in each test; the producer
    // end of this direction is driven by nobody else.
    let producer = unsafe { Producer::new(region.ring(Direction::ClientToServer)) };
    (channel, producer, region)
}

fn publish_bytes(producer: &mut Producer, bytes: &[u8]) {
    let at = producer.reserve(bytes.len() as u64).unwrap();
    // SAFETY: the reservation is ours until published and as long as `bytes`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), producer.bytes(at), bytes.len()) };
    producer.publish(Some(at));
}

fn poll_error(channel: &ShmChannel) -> String {
    let mut rx = channel.rx.lock();
    match channel.poll(&mut rx) {
        Err(e) => e.to_string(),
        Ok(Polled::Frame(f)) => panic!("garbage accepted as {f:?}"),
        Ok(_) => panic!("nothing seen"),
    }
}

#[test]
fn a_good_frame_then_garbage_frames_and_lengths_are_refused() {
    let big = Tensor::build::<f32>([4096], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32)).unwrap();
    let frame =
        OutgoingFrame::new(FrameKind::Request, 1, 9, b"meta", std::slice::from_ref(&big), &FrameLimits::default())
            .unwrap()
            .to_vec();

    // A well-formed frame decodes, its payload read in place.
    let (channel, mut producer, _region) = hostile_pair(1 << 16);
    publish_bytes(&mut producer, &frame);
    let mut rx = channel.rx.lock();
    let Ok(Polled::Frame(got)) = channel.poll(&mut rx) else { panic!("good frame refused") };
    assert!(got.payloads()[0].bit_eq(&big));
    assert!(got.buffer().is_lent());
    drop(rx);

    // Bytes that are not a frame.
    let (channel, mut producer, _region) = hostile_pair(1 << 16);
    publish_bytes(&mut producer, &[0xAB; 256]);
    assert!(poll_error(&channel).contains("magic"), "{}", poll_error_hint());

    // A frame whose header claims more than its span holds.
    let (channel, mut producer, _region) = hostile_pair(1 << 16);
    publish_bytes(&mut producer, &frame[..frame.len() - 64]);
    let err = poll_error(&channel);
    assert!(err.contains("ring span"), "{err}");

    // A payload table pointing past the frame's payload bytes.
    let (channel, mut producer, _region) = hostile_pair(1 << 16);
    let mut bad = frame.clone();
    let table_at = 64 + 8; // meta (4 bytes) padded to 8, then the table
    bad[table_at + 8..table_at + 16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    publish_bytes(&mut producer, &bad);
    let err = poll_error(&channel);
    assert!(err.contains("payload"), "{err}");

    // A descriptor whose span lies outside the ring, written raw.
    let (channel, _producer, region) = hostile_pair(1 << 16);
    let memory = region.ring(Direction::ClientToServer);
    // SAFETY: slot 0 of this direction's descriptors; the channel reads it
    // only after the tail store below.
    unsafe {
        std::ptr::write_volatile(
            memory.descriptors,
            ring::Descriptor { kind: ring::DESC_FRAME, position: 1 << 20, len: 1 << 30, ..Default::default() },
        )
    };
    // SAFETY: the control block lies in the mapping.
    unsafe { &*memory.control }.producer.desc_tail.store(1, std::sync::atomic::Ordering::Release);
    let err = poll_error(&channel);
    assert!(err.contains("inside"), "{err}");
}

fn poll_error_hint() -> &'static str {
    "garbage must be refused by the frame header check"
}
