//! The channel against a hostile producer: garbage written straight into
//! the shared ring is refused, and nothing outside the ring is read.

use super::region::{Direction, Layout, SharedRegion};
use super::ring::Producer;
use super::*;
use crate::net::frame::{FrameHeader, FrameKind, FrameLimits, FrameParts, OutgoingFrame};
use crate::tensor::Tensor;

/// A server-side channel over a fresh region, and a raw producer for the
/// client-to-server direction (the hostile peer's pen).
fn hostile_pair(capacity: u64) -> (ShmChannel, Producer, SharedRegion) {
    let layout = Layout::new(8, capacity).unwrap();
    let (region, fd) = SharedRegion::create(layout, [7, 7]).unwrap();
    let server_view = SharedRegion::open(&fd, layout, [7, 7]).unwrap();
    let channel = ShmChannel::new(server_view, Side::Server, FrameLimits::default(), Duration::ZERO);
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
    let far = ring::Descriptor { kind: ring::DESC_FRAME, position: 1 << 20, len: 1 << 30, ..Default::default() };
    super::fuzzing::publish_raw(memory, 0, far, &[]);
    let err = poll_error(&channel);
    assert!(err.contains("inside"), "{err}");

    // A split frame whose head starts its span: garbage there, and a good
    // head over a span holding half the payload it announces.
    let spanned = |len| ring::Descriptor {
        kind: ring::DESC_SPLIT_SPANNED_HEAD,
        position: 0,
        len,
        reserved2: (frame.len() - big.byte_len()) as u64,
        reserved: 0,
    };
    let (channel, _producer, region) = hostile_pair(1 << 16);
    let memory = region.ring(Direction::ClientToServer);
    // SAFETY: the first 512 bytes of the data ring, inside the region.
    unsafe { std::ptr::write_bytes(memory.data, 0xAB, 512) };
    super::fuzzing::publish_raw(memory, 0, spanned(512), &[]);
    assert!(poll_error(&channel).contains("magic"), "{}", poll_error_hint());
    let (channel, _producer, region) = hostile_pair(1 << 16);
    let memory = region.ring(Direction::ClientToServer);
    let half = frame.len() - big.byte_len() / 2;
    // SAFETY: `half` < 64 KiB bytes at the start of the data ring.
    unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), memory.data, half) };
    super::fuzzing::publish_raw(memory, 0, spanned(half as u64), &[]);
    let err = poll_error(&channel);
    assert!(err.contains("split frame"), "{err}");

    // Inline frames: garbage bytes, a header claiming more than the slot
    // holds, and a length past the slot.
    let (channel, _producer, region) = hostile_pair(1 << 16);
    let inline = |len| ring::Descriptor { kind: ring::DESC_INLINE, len, ..Default::default() };
    super::fuzzing::publish_raw(region.ring(Direction::ClientToServer), 0, inline(256), &[0xAB; 256]);
    assert!(poll_error(&channel).contains("unknown frame kind 171"), "{}", poll_error_hint());
    let small = OutgoingFrame::new(FrameKind::Request, 1, 9, b"meta", &[], &FrameLimits::default()).unwrap();
    let small = inline_frame_bytes(&small);
    let (channel, _producer, region) = hostile_pair(1 << 16);
    super::fuzzing::publish_raw(region.ring(Direction::ClientToServer), 0, inline(small.len() as u64 - 64), &small);
    assert!(poll_error(&channel).contains("inline frame's metadata (4 B) and table (0 B) in a 0-byte body"));
    // A head claiming more metadata than the body holds, and a body that
    // is not whole lines.
    let (channel, _producer, region) = hostile_pair(1 << 16);
    let mut long_meta = small.clone();
    long_meta[16..20].copy_from_slice(&400u32.to_le_bytes());
    super::fuzzing::publish_raw(region.ring(Direction::ClientToServer), 0, inline(small.len() as u64), &long_meta);
    assert!(poll_error(&channel).contains("metadata (400 B)"));
    let (channel, _producer, region) = hostile_pair(1 << 16);
    super::fuzzing::publish_raw(region.ring(Direction::ClientToServer), 0, inline(small.len() as u64 - 8), &small);
    assert!(poll_error(&channel).contains("inconsistent lengths"), "{}", poll_error(&channel));
    let (channel, _producer, region) = hostile_pair(1 << 16);
    super::fuzzing::publish_raw(region.ring(Direction::ClientToServer), 0, inline(1 << 20), &small);
    assert!(poll_error(&channel).contains("inline frame of 1048576 bytes"));
    // The same small frame, well formed, crosses inline.
    let (channel, _producer, region) = hostile_pair(1 << 16);
    super::fuzzing::publish_raw(region.ring(Direction::ClientToServer), 0, inline(small.len() as u64), &small);
    let mut rx = channel.rx.lock();
    let Ok(Polled::Frame(got)) = channel.poll(&mut rx) else { panic!("good inline frame refused") };
    assert_eq!(got.meta_bytes(), b"meta");
}

/// Frames of metadata alone up to a line's worth cross in the slot's
/// first line, whole; longer ones or ones with payloads take the slot's
/// inline bytes.
#[test]
fn small_frames_cross_in_one_line_and_others_in_the_slot() {
    let layout = Layout::new(8, 1 << 16).unwrap();
    let (region, fd) = SharedRegion::create(layout, [5, 5]).unwrap();
    let server_view = SharedRegion::open(&fd, layout, [5, 5]).unwrap();
    let client = ShmChannel::new(region, Side::Client, FrameLimits::default(), Duration::ZERO);
    let server = ShmChannel::new(server_view, Side::Server, FrameLimits::default(), Duration::ZERO);
    let tensor = Tensor::scalar(3.5f32);
    for (meta_len, with_payload, line) in [(0, false, true), (1, false, true), (39, false, true), (40, false, true)]
        .into_iter()
        .chain([(41, false, false), (8, true, false)])
    {
        let meta: Vec<u8> = (0..meta_len).map(|i| i as u8 ^ 0x5a).collect();
        let payloads = if with_payload { vec![tensor.clone()] } else { Vec::new() };
        let parts = FrameParts {
            kind: FrameKind::Response,
            method: 11,
            request_id: 0x0102_0304_0506_0708 + meta_len as u64,
            meta: &meta,
            payloads: &payloads,
        };
        let header = FrameHeader::for_parts(&parts, &FrameLimits::default()).unwrap();
        assert_eq!(line_len(&header).is_some(), line, "{meta_len} B of metadata");
        match client.try_place_line(&parts) {
            Some(placed) => assert!(line && placed == Placed::Sent, "{meta_len} B: {placed:?}"),
            None => {
                assert!(!line, "{meta_len} B: not sent as a line");
                assert_eq!(client.try_place_inline(&header, &meta, &payloads), Some(Placed::Sent));
            }
        }
        let mut rx = server.rx.lock();
        let Ok(Polled::Frame(got)) = server.poll(&mut rx) else { panic!("{meta_len} B: the frame did not arrive") };
        assert_eq!(got.header, header, "{meta_len} B: the header as the sender made it");
        assert_eq!(got.meta_bytes(), meta.as_slice());
        assert_eq!(got.payloads().len(), payloads.len());
        if with_payload {
            assert!(got.payloads()[0].bit_eq(&tensor));
        }
        assert!(matches!(server.poll(&mut rx), Ok(Polled::Empty)), "one frame per send");
    }
}

/// A line frame's head is checked as any frame's: a kind that is no
/// frame's, fewer bytes than its head, more than a line (refused by the
/// ring) and a frame larger than the receiver's limit.
#[test]
fn garbage_line_frames_are_refused() {
    let good = |kind: u8| {
        let mut line = vec![kind, 0, 11, 0];
        line.extend_from_slice(&9u64.to_le_bytes());
        line.extend_from_slice(b"meta");
        line
    };
    let line_word = |len: usize| ring::DESC_LINE | (len as u32) << 8;
    let cases: [(u32, Vec<u8>, &str); 4] = [
        (line_word(16), good(200), "unknown frame kind 200"),
        (line_word(11), good(FrameKind::Request as u8), "a line frame of 11 bytes"),
        (line_word(53), good(FrameKind::Request as u8), "a line frame of 53 bytes"),
        (ring::DESC_LINE, good(FrameKind::Request as u8), "a line frame of 0 bytes"),
    ];
    for (word, bytes, expected) in cases {
        let (channel, _producer, region) = hostile_pair(1 << 16);
        super::fuzzing::publish_raw_line(region.ring(Direction::ClientToServer), 0, word, &bytes);
        let err = poll_error(&channel);
        assert!(err.contains(expected), "{expected}: {err}");
    }
    // Well formed, it crosses.
    let (channel, _producer, region) = hostile_pair(1 << 16);
    let line = good(FrameKind::Request as u8);
    super::fuzzing::publish_raw_line(region.ring(Direction::ClientToServer), 0, line_word(line.len()), &line);
    let mut rx = channel.rx.lock();
    let Ok(Polled::Frame(got)) = channel.poll(&mut rx) else { panic!("good line frame refused") };
    assert_eq!((got.header.method, got.header.request_id, got.meta_bytes()), (11, 9, &b"meta"[..]));
    drop(rx);
    // A receiver whose frames may not be that large refuses it.
    let layout = Layout::new(8, 1 << 16).unwrap();
    let (region, fd) = SharedRegion::create(layout, [7, 7]).unwrap();
    let view = SharedRegion::open(&fd, layout, [7, 7]).unwrap();
    let tiny = FrameLimits { max_frame_bytes: 100, ..FrameLimits::default() };
    let channel = ShmChannel::new(view, Side::Server, tiny, Duration::ZERO);
    super::fuzzing::publish_raw_line(region.ring(Direction::ClientToServer), 0, line_word(line.len()), &line);
    assert!(poll_error(&channel).contains("exceeds"), "{}", poll_error(&channel));
}

fn poll_error_hint() -> &'static str {
    "garbage must be refused by the frame header check"
}

/// Bytes of the memfd behind `fd` that have pages (resident or swapped).
fn allocated_bytes(fd: &std::os::fd::OwnedFd) -> u64 {
    use std::os::fd::AsRawFd;
    // SAFETY: fstat writes into the struct we own, for a descriptor we hold.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) }, 0);
    stat.st_blocks as u64 * 512
}

#[test]
fn an_idle_channel_returns_the_free_pages_past_the_kept_prefix() {
    let layout = Layout::new(16, 32 << 20).unwrap();
    let (region, fd) = SharedRegion::create(layout, [3, 4]).unwrap();
    let server_view = SharedRegion::open(&fd, layout, [3, 4]).unwrap();
    let trim_after = Duration::from_millis(50);
    let client = ShmChannel::new(region, Side::Client, FrameLimits::default(), trim_after);
    let server = ShmChannel::new(server_view, Side::Server, FrameLimits::default(), trim_after);
    let big = Tensor::build::<f32>([5 << 20], |s| s.fill(7.0)).unwrap();
    let frame =
        OutgoingFrame::new(FrameKind::Request, 1, 1, b"big", std::slice::from_ref(&big), &FrameLimits::default())
            .unwrap();
    assert_eq!(client.try_place(&frame), Placed::Sent);
    let touched = allocated_bytes(&fd);
    assert!(touched >= 20 << 20, "the frame's pages are allocated: {touched}");
    {
        let mut rx = server.rx.lock();
        let Ok(Polled::Frame(got)) = server.poll(&mut rx) else { panic!("the frame did not arrive") };
        assert!(got.payloads()[0].bit_eq(&big));
    } // released: the ring is free again, its pages still allocated
    // The trim punches each free range in turn: wait for all of them.
    let until = Instant::now() + Duration::from_secs(10);
    while allocated_bytes(&fd) > TRIM_KEEP_BYTES + (1 << 20) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = allocated_bytes(&fd);
    eprintln!("ring pages allocated: {touched} bytes after the frame, {left} after the trim");
    assert!(left <= TRIM_KEEP_BYTES + (1 << 20), "after the trim {left} bytes stay allocated (had {touched})");
    // The trimmed pages read as zeros, and the ring works on: a second
    // frame crosses intact.
    assert_eq!(client.try_place(&frame), Placed::Sent);
    let mut rx = server.rx.lock();
    let Ok(Polled::Frame(got)) = server.poll(&mut rx) else { panic!("the second frame did not arrive") };
    assert!(got.payloads()[0].bit_eq(&big));
}

/// A peer can still write a span after the frame was checked: payloads
/// whose bytes were validated (bools) or that kernels check then use
/// (integer indices) are copied out; floats are read in place.
#[test]
fn integer_and_bool_payloads_are_copied_out_and_floats_read_in_place() {
    let cases = [
        (Tensor::build::<i32>([4096], |s| s.fill(3)).unwrap(), false),
        (Tensor::build::<bool>([8192], |s| s.fill(true)).unwrap(), false),
        (Tensor::build::<f64>([2048], |s| s.fill(0.5)).unwrap(), true),
    ];
    for (tensor, lent) in cases {
        let frame = OutgoingFrame::new(
            FrameKind::Request,
            1,
            9,
            b"meta",
            std::slice::from_ref(&tensor),
            &FrameLimits::default(),
        )
        .unwrap()
        .to_vec();
        let (channel, mut producer, region) = hostile_pair(1 << 16);
        publish_bytes(&mut producer, &frame);
        let mut rx = channel.rx.lock();
        let Ok(Polled::Frame(got)) = channel.poll(&mut rx) else { panic!("good frame refused") };
        assert_eq!(got.buffer().is_lent(), lent, "{:?}", tensor.dtype());
        // The hostile peer rewrites the payload after the check.
        let data = region.ring(Direction::ClientToServer).data;
        // SAFETY: the frame's bytes inside the data ring (it starts at 0).
        unsafe { std::ptr::write_bytes(data.add(frame.len() - tensor.byte_len()), 2, tensor.byte_len()) };
        assert_eq!(got.payloads()[0].bit_eq(&tensor), !lent, "{:?}", tensor.dtype());
    }
}

/// The next frame `server` reads, checked to carry `sent`'s payloads bit
/// for bit.
fn receive_intact(server: &ShmChannel, sent: &[Tensor], what: &str) -> crate::net::frame::ReceivedFrame {
    let mut rx = server.rx.lock();
    let Ok(Polled::Frame(got)) = server.poll(&mut rx) else { panic!("{what}: the frame did not arrive") };
    assert_eq!(got.payloads().len(), sent.len(), "{what}");
    for (i, (sent, received)) in sent.iter().zip(got.payloads()).enumerate() {
        assert!(received.bit_eq(sent), "{what}: payload {i} changed on the way");
    }
    got
}

/// Whether `tensor`'s bytes start in `ring`'s data ring (as this process
/// maps it).
fn lies_in(ring: ring::RingMemory, tensor: &Tensor) -> bool {
    let data = ring.data as usize;
    (data..data + ring.capacity as usize).contains(&(tensor.as_bytes().as_ptr() as usize))
}

/// `elements` of `fill` built as a kernel's output offered `placement`.
fn placed_f32(placement: &SharedPlacement, elements: usize, fill: f32) -> Tensor {
    crate::tensor::placement::place_outputs(&**placement, || Tensor::build::<f32>([elements], |s| s.fill(fill)))
        .unwrap()
}

/// A client channel whose kernels write in the server's 4 MiB ring, and
/// that server.
fn placing_pair() -> (ShmChannel, ShmChannel) {
    let layout = Layout::new(16, 4 << 20).unwrap();
    let (region, fd) = SharedRegion::create(layout, [5, 9]).unwrap();
    let server_view = SharedRegion::open(&fd, layout, [5, 9]).unwrap();
    let client = ShmChannel::new(region, Side::Client, FrameLimits::default(), Duration::ZERO).writing_in_place(true);
    let server = ShmChannel::new(server_view, Side::Server, FrameLimits::default(), Duration::ZERO);
    (client, server)
}

/// A frame whose last payload a kernel wrote in the peer's ring crosses as
/// a split frame even with small payloads before it: they travel in the
/// slot with the head. A frame copied whole while a span is held (the
/// kernel's output not sent yet) finds room in the ring.
#[test]
fn small_payloads_travel_in_the_slot_before_a_payload_written_in_place() {
    let (client, server) = placing_pair();
    let placement = client.output_placement().unwrap();
    let step = Tensor::scalar(41i64);
    let small = Tensor::from_slice::<f32>([4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    // The second round's span is held while a copy of its tensor goes
    // out: it must leave that copy room in the ring.
    for (round, big_last) in [(0, true), (1, false)] {
        let big = placed_f32(&placement, 1 << 15, round as f32 + 0.5);
        let payloads = match big_last {
            true => vec![step.clone(), small.clone(), big.clone()],
            false => vec![big.deep_copy(), step.clone(), small.clone()],
        };
        let frame =
            OutgoingFrame::new(FrameKind::Response, 1, 3, b"mixed", &payloads, &FrameLimits::default()).unwrap();
        let before = client.stats().frames_in_place;
        assert_eq!(client.try_place(&frame), Placed::Sent);
        assert_eq!(client.stats().frames_in_place - before, u64::from(big_last), "round {round}");
        drop(frame);
        drop(big);
        let got = receive_intact(&server, &payloads, &format!("round {round}"));
        assert_eq!(got.meta_bytes(), b"mixed");
        if big_last {
            // The large payload is read where the kernel wrote it.
            let ring = server.region().ring(Direction::ClientToServer);
            assert!(lies_in(ring, &got.payloads()[2]), "the placed payload was copied");
            assert!(got.buffer().is_lent(), "the placed payload is lent from the ring");
        }
    }
}

/// A frame whose last payloads kernels wrote in the peer's ring, each in a
/// span of its own, crosses as one split frame over all of them: float
/// payloads are read where they were written; a frame with a placed
/// payload that is not floating point is copied out of its spans on
/// arrival, values intact either way. Payloads not placed beside placed
/// ones are copied into spans of their own, in the same frame.
#[test]
fn several_payloads_written_in_place_cross_in_one_split_frame() {
    let (client, server) = placing_pair();
    let placement = client.output_placement().unwrap();
    let place = |fill: f32| placed_f32(&placement, 1 << 15, fill);
    let in_ring = |t: &Tensor| lies_in(server.region().ring(Direction::ClientToServer), t);
    let step = Tensor::scalar(7i64);
    // The most spans first: a quiet ring's held spans go back to its first
    // pages, in front of the bytes the last round used.
    for (round, count) in [(0usize, ring::MAX_FRAME_SPANS), (1, 2), (2, 3)] {
        let placed: Vec<Tensor> = (0..count).map(|i| place(round as f32 * 10.0 + i as f32)).collect();
        let mut payloads = vec![step.clone()];
        payloads.extend(placed.iter().cloned());
        let frame =
            OutgoingFrame::new(FrameKind::Response, 1, 3, b"several", &payloads, &FrameLimits::default()).unwrap();
        let before = client.stats().frames_in_place;
        assert_eq!(client.try_place(&frame), Placed::Sent, "round {round}");
        assert_eq!(client.stats().frames_in_place - before, 1, "round {round}: one frame in place");
        drop(frame);
        drop(placed);
        let got = receive_intact(&server, &payloads, &format!("round {round}"));
        assert!(!in_ring(&got.payloads()[0]), "the small payload came in the slot");
        for (i, received) in got.payloads()[1..].iter().enumerate() {
            assert!(in_ring(received), "round {round}: placed payload {i} was copied");
        }
    }
    // An integer payload written in place: all spans copied on arrival.
    let ints = crate::tensor::placement::place_outputs(&*placement, || {
        Tensor::build::<i64>([1 << 14], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as i64))
    })
    .unwrap();
    let floats = place(3.5);
    let payloads = vec![floats.clone(), ints.clone()];
    let frame = OutgoingFrame::new(FrameKind::Response, 1, 4, b"mixed", &payloads, &FrameLimits::default()).unwrap();
    assert_eq!(client.try_place(&frame), Placed::Sent);
    drop((frame, ints, floats));
    let mut rx = server.rx.lock();
    let Ok(Polled::Frame(got)) = server.poll(&mut rx) else { panic!("the mixed frame did not arrive") };
    for (sent, received) in payloads.iter().zip(got.payloads()) {
        assert!(received.bit_eq(sent), "a payload changed on the way");
        assert!(!in_ring(received), "a frame holding integers is copied out of the ring");
    }
    drop(got);
    drop(rx);
    // Payloads not placed beside placed ones: each run of them is copied
    // into a span of its own, the placed ones cross where they lie, and
    // everything past the head is read in place on arrival (all floats).
    let heap = |fill: f32| Tensor::build::<f32>([1 << 14], |s| s.fill(fill)).unwrap();
    for (round, payloads) in [
        vec![place(1.25), heap(2.5)],
        vec![heap(3.5), place(4.25)],
        vec![Tensor::scalar(9.0f32), place(5.5), heap(6.5), heap(7.5), place(8.25)],
    ]
    .into_iter()
    .enumerate()
    {
        let frame =
            OutgoingFrame::new(FrameKind::Response, 1, 5, b"mixed runs", &payloads, &FrameLimits::default()).unwrap();
        let before = client.stats().frames_in_place;
        assert_eq!(client.try_place(&frame), Placed::Sent);
        assert_eq!(client.stats().frames_in_place - before, 1, "round {round}: split, not copied whole");
        drop(frame);
        let got = receive_intact(&server, &payloads, &format!("round {round}"));
        for (i, (sent, received)) in payloads.iter().zip(got.payloads()).enumerate() {
            assert_eq!(in_ring(received), sent.byte_len() >= 1 << 16, "round {round}: payload {i}");
        }
    }
}

/// Two outputs placed in a quiet ring: the first goes back to its first
/// pages, and the second after it even where that passes the bytes the
/// last frame ended at (the reader has released everything), so both
/// cross where their kernels wrote them, in one frame. A frame copied
/// whole meanwhile finds room after them.
#[test]
fn a_second_output_is_placed_behind_one_at_the_first_pages() {
    let (client, server) = placing_pair();
    let placement = client.output_placement().unwrap();
    let placed_here = |t: &Tensor| lies_in(client.region().ring(Direction::ClientToServer), t);
    let receive = |what: &str| {
        let mut rx = server.rx.lock();
        let Ok(Polled::Frame(got)) = server.poll(&mut rx) else { panic!("{what} did not arrive") };
        got
    };
    // 1.5 MiB copied whole: the ring's tail ends a little past 1.5 MiB.
    let heap = Tensor::build::<f32>([3 << 17], |s| s.fill(0.25)).unwrap();
    let frame = OutgoingFrame::new(FrameKind::Response, 1, 1, b"first", &[heap], &FrameLimits::default()).unwrap();
    assert_eq!(client.try_place(&frame), Placed::Sent);
    drop(receive("the first frame"));
    let place = |fill: f32| placed_f32(&placement, 1 << 18, fill);
    let (one, two) = (place(1.5), place(2.5));
    assert!(placed_here(&one), "the first output was not placed");
    assert!(placed_here(&two), "the second output was not placed");
    let between = Tensor::build::<f32>([1 << 18], |s| s.fill(9.0)).unwrap();
    let frame = OutgoingFrame::new(FrameKind::Response, 1, 2, b"between", &[between], &FrameLimits::default()).unwrap();
    assert_eq!(client.try_place(&frame), Placed::Sent);
    drop(frame);
    let got = receive("the frame sent while both were held");
    assert!(got.payloads()[0].as_slice::<f32>().unwrap().iter().all(|&v| v == 9.0));
    drop(got);
    let payloads = vec![one.clone(), two.clone()];
    let frame = OutgoingFrame::new(FrameKind::Response, 1, 3, b"both", &payloads, &FrameLimits::default()).unwrap();
    let before = client.stats().frames_in_place;
    assert_eq!(client.try_place(&frame), Placed::Sent);
    assert_eq!(client.stats().frames_in_place - before, 1, "one split frame over both spans");
    drop((frame, one, two));
    let got = receive("the answer");
    for (sent, received) in payloads.iter().zip(got.payloads()) {
        assert!(received.bit_eq(sent), "a payload changed on the way");
    }
}

/// A frame whose head (metadata and payload table) is too long for a
/// slot still crosses with its placed payloads where they were written:
/// the head starts a span of its own, or the span of the payloads copied
/// after it.
#[test]
fn a_head_too_long_for_a_slot_goes_in_the_first_span() {
    let (client, server) = placing_pair();
    let placement = client.output_placement().unwrap();
    let in_ring = |t: &Tensor| lies_in(server.region().ring(Direction::ClientToServer), t);
    let place = |fill: f32| placed_f32(&placement, 1 << 14, fill);
    let meta = vec![b'm'; 600];
    for (round, copied_first) in [(0, false), (1, true), (2, false)] {
        let mut payloads = Vec::new();
        if copied_first {
            payloads.push(Tensor::scalar(5.0f32));
            payloads.push(Tensor::build::<f32>([1 << 14], |s| s.fill(0.5)).unwrap());
        }
        payloads.extend((0..3).map(|i| place(round as f32 + i as f32)));
        let frame = OutgoingFrame::new(FrameKind::Response, 1, 7, &meta, &payloads, &FrameLimits::default()).unwrap();
        assert!(frame.head().len() > ring::INLINE_BYTES);
        let before = client.stats();
        assert_eq!(client.try_place(&frame), Placed::Sent, "round {round}");
        let after = client.stats();
        assert_eq!(after.frames_in_place - before.frames_in_place, 1, "round {round}: split, not copied whole");
        assert_eq!(after.bytes_in_place - before.bytes_in_place, 3 << 16, "round {round}");
        drop(frame);
        let got = receive_intact(&server, &payloads, &format!("round {round}"));
        assert_eq!(got.meta_bytes(), &meta[..]);
        for (i, (sent, received)) in payloads.iter().zip(got.payloads()).enumerate() {
            assert_eq!(in_ring(received), sent.byte_len() >= 1 << 16, "round {round}: payload {i}");
        }
    }
}

/// A split frame takes a slot per span: on a ring with fewer slots than
/// the frame would need, its last placed payloads are copied with the
/// runs beside them until it fits, instead of waiting for slots that can
/// never all be free.
#[test]
fn a_frame_needing_more_slots_than_the_ring_has_copies_its_last_placed_payloads() {
    let layout = Layout::new(2, 4 << 20).unwrap();
    let (region, fd) = SharedRegion::create(layout, [5, 9]).unwrap();
    let server_view = SharedRegion::open(&fd, layout, [5, 9]).unwrap();
    let client = ShmChannel::new(region, Side::Client, FrameLimits::default(), Duration::ZERO).writing_in_place(true);
    let server = ShmChannel::new(server_view, Side::Server, FrameLimits::default(), Duration::ZERO);
    let placement = client.output_placement().unwrap();
    // Two spans at most: past two placed payloads, the first crosses in
    // place and the rest in one copied span.
    for count in [2, 3, 5] {
        let payloads: Vec<Tensor> = (0..count).map(|i| placed_f32(&placement, 1 << 14, i as f32)).collect();
        let frame =
            OutgoingFrame::new(FrameKind::Response, 1, 6, b"slots", &payloads, &FrameLimits::default()).unwrap();
        let before = client.stats();
        assert_eq!(client.try_place(&frame), Placed::Sent, "{count} placed payloads");
        let after = client.stats();
        assert_eq!(after.frames_in_place - before.frames_in_place, 1, "{count} placed payloads");
        let one = payloads[0].byte_len() as u64;
        let in_place = if count <= 2 { count as u64 * one } else { one };
        assert_eq!(after.bytes_in_place - before.bytes_in_place, in_place, "{count}: the first crossed in place");
        let copied = after.bytes_copied - before.bytes_copied;
        assert!(copied >= (count as u64 * one).saturating_sub(in_place), "{count}: the rest copied");
        drop(frame);
        let mut rx = server.rx.lock();
        let Ok(Polled::Frame(got)) = server.poll(&mut rx) else { panic!("{count}: the frame did not arrive") };
        for (sent, received) in payloads.iter().zip(got.payloads()) {
            assert!(received.bit_eq(sent), "{count}: a payload changed on the way");
        }
    }
}

/// A reader that keeps what it receives (a client appending each result
/// to a history) is lent frames while the producer can still see every
/// lent byte and place frames around them: up to `ring::HOLDS` ranges of
/// touching spans, up to three quarters of the ring. Later frames are
/// copied out on arrival and their spans released, so frames lap the ring
/// around the kept ones instead of finding it full.
#[test]
fn a_reader_keeping_what_it_receives_is_lent_what_the_ring_can_list_and_gets_copies_past_it() {
    // 32 KiB payloads, 4 × HOLDS of them (6 MiB) through a 4 MiB ring.
    let sent: Vec<Tensor> =
        (0..4 * ring::HOLDS).map(|i| Tensor::build::<f32>([8 << 10], |s| s.fill(i as f32)).unwrap()).collect();
    let ring_bytes = 4u64 << 20;
    let mut span_bytes = 0;
    // Keeping every frame: one range, lent up to three quarters of the ring.
    // Keeping every second: a range per kept frame, lent up to HOLDS.
    for keep_every in [1, 2] {
        let (client, server) = placing_pair();
        let mut kept = Vec::new();
        for (i, tensor) in sent.iter().enumerate() {
            let frame = OutgoingFrame::new(
                FrameKind::Response,
                1,
                i as u64,
                b"kept",
                std::slice::from_ref(tensor),
                &FrameLimits::default(),
            )
            .unwrap();
            span_bytes = frame.header.frame_len().next_multiple_of(ring::SPAN_ALIGN);
            assert_eq!(client.try_place(&frame), Placed::Sent, "keeping every {keep_every}: frame {i} found no room");
            let got = receive_intact(&server, std::slice::from_ref(tensor), &format!("frame {i}"));
            if i % keep_every == 0 {
                kept.push((i, got));
            }
        }
        let ring = server.region().ring(Direction::ClientToServer);
        let lent = kept.iter().filter(|(_, got)| lies_in(ring, &got.payloads()[0])).count();
        let most = match keep_every {
            1 => (ring_bytes * ring::LENT_BYTES_SHARE.0 / ring::LENT_BYTES_SHARE.1 / span_bytes) as usize,
            _ => ring::HOLDS,
        };
        assert_eq!(lent, most, "keeping every {keep_every}");
        for (i, got) in &kept {
            assert!(got.payloads()[0].bit_eq(&sent[*i]), "keeping every {keep_every}: frame {i} changed while kept");
        }
        let copied_out = server.stats().bytes_copied_out;
        // Every frame from the first one copied on (kept or not).
        let copied = sent.len() - lent * keep_every;
        assert_eq!(copied_out, copied as u64 * sent[0].byte_len() as u64, "keeping every {keep_every}");
        assert!(client.stats().space_stalls == 0 && client.stats().socket_frames == 0);
    }
}

/// A frame encoded straight into a slot reads back as the same frame
/// built whole; an inline frame's receive buffer is reused once nothing
/// holds it, and never while a received frame or tensor still does.
#[test]
fn inline_frames_are_encoded_in_the_slot_and_their_buffer_reused_only_when_free() {
    let (client, server) = placing_pair();
    let limits = FrameLimits::default();
    let scalar = Tensor::scalar(7i64);
    let pair = Tensor::from_slice::<f32>([2], &[1.5, -2.0]).unwrap();
    let payloads = [scalar.clone(), pair.clone()];
    let send = |id: u64, meta: &[u8]| {
        let parts = FrameParts { kind: FrameKind::Request, method: 3, request_id: id, meta, payloads: &payloads };
        let header = FrameHeader::for_parts(&parts, &limits).unwrap();
        assert_eq!(client.try_place_inline(&header, meta, &payloads), Some(Placed::Sent));
    };
    send(1, b"first");
    let first = receive_intact(&server, &payloads, "first");
    let whole = OutgoingFrame::new(FrameKind::Request, 3, 1, b"first", &payloads, &limits).unwrap();
    assert_eq!(first.header, whole.header);
    assert_eq!(first.meta_bytes(), b"first");
    // Kept across the next receive: the next frame gets a buffer of its own.
    send(2, b"second");
    let second = receive_intact(&server, &payloads, "second");
    assert!(!Arc::ptr_eq(first.meta_buffer(), second.meta_buffer()));
    assert_eq!(first.meta_bytes(), b"first", "a kept frame's bytes were overwritten");
    let kept_tensor = second.payloads()[1].clone();
    drop(second);
    // A tensor over the second buffer still holds it.
    send(3, b"third");
    let third = receive_intact(&server, &payloads, "third");
    assert!(kept_tensor.bit_eq(&pair), "a kept tensor's bytes were overwritten");
    let third_buf = Arc::as_ptr(third.meta_buffer());
    drop((first, third, kept_tensor));
    // Nothing holds the last buffer: the next frame reuses it.
    send(4, b"fourth");
    let fourth = receive_intact(&server, &payloads, "fourth");
    assert_eq!(Arc::as_ptr(fourth.meta_buffer()), third_buf, "a free inline buffer was not reused");
    assert_eq!((fourth.header.request_id, fourth.meta_bytes()), (4, &b"fourth"[..]));
    // Too large for a slot: left to the general path.
    let big = vec![0u8; ring::INLINE_BYTES];
    let parts = FrameParts { kind: FrameKind::Request, method: 3, request_id: 5, meta: &big, payloads: &[] };
    let header = FrameHeader::for_parts(&parts, &limits).unwrap();
    assert_eq!(client.try_place_inline(&header, &big, &[]), None);
}

/// Readers that find the cell taken wait their turn: no two guards at once,
/// and every update of the state is seen by the next holder.
#[test]
fn the_reader_cell_admits_one_reader_at_a_time() {
    let cell = ReaderCell::new((0u64, false));
    let rounds = if cfg!(miri) { 50 } else { 20_000 };
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                for _ in 0..rounds {
                    let mut state = cell.lock();
                    assert!(!state.1, "two readers at once");
                    state.1 = true;
                    state.0 += 1;
                    std::hint::spin_loop();
                    state.1 = false;
                }
            });
        }
    });
    assert_eq!(cell.lock().0, 3 * rounds);
}

/// Two readers learn they wait on one CPU only from each other's notes:
/// the second to note, on the same CPU, hears so; a note taken back, or
/// one from another CPU, says nothing. Exactly one of them moves: the
/// client's, unless it cannot leave its CPU; then the server's, unless
/// neither can.
#[test]
fn readers_waiting_on_one_cpu_find_each_other_through_their_notes() {
    let (client, server) = placing_pair();
    let pin_here = || {
        let mut set = nix::sched::CpuSet::new();
        // SAFETY: sched_getcpu takes no arguments.
        let here = usize::try_from(unsafe { libc::sched_getcpu() }).expect("a CPU");
        set.set(here).expect("a CPU in range");
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pinned");
    };
    let moves = |shared: Option<SharedCore>| shared.expect("found sharing").moves;
    std::thread::scope(|s| {
        s.spawn(|| {
            // One thread on one CPU plays both readers.
            pin_here();
            assert_eq!(client.note_waiting(false), None, "nobody else noted a wait");
            assert!(!moves(server.note_waiting(false)), "the server's reader stays: the client's moves");
            assert!(moves(client.note_waiting(false)));
            // The client's reader cannot leave its CPU: the server's moves.
            assert!(!moves(client.note_waiting(true)));
            assert!(moves(server.note_waiting(false)));
            // Neither can: neither moves.
            assert!(!moves(server.note_waiting(true)));
            assert!(!moves(client.note_waiting(true)));
            server.note_wait_over();
            assert_eq!(client.note_waiting(false), None, "the server's wait is over");
            client.note_wait_over();
            // A note from another CPU (as a peer would write it).
            server.region().ring(Direction::ClientToServer).wait_note().store(u32::MAX, Ordering::Relaxed);
            assert_eq!(client.note_waiting(false), None);
        });
    });
}
