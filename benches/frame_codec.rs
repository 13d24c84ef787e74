//! Micro-benchmarks of the frame codec, without sockets: encoding a frame
//! (header, archive, payload table; payloads by reference), decoding it from
//! a receive stream in place, and validating archived metadata.

use criterion::{Criterion, criterion_group, criterion_main};
use ringflow::net::frame::{FrameKind, FrameLimits, OutgoingFrame};
use ringflow::net::message::{self, NamedTensorRef, PayloadList, RunOptions, RunStepRequest};
use ringflow::net::reader::FrameReader;
use ringflow::tensor::Tensor;
use std::hint::black_box;

fn run_step(tensors: &[Tensor]) -> (Vec<u8>, Vec<Tensor>) {
    let mut list = PayloadList::new();
    let feeds = tensors
        .iter()
        .enumerate()
        .map(|(i, t)| NamedTensorRef { name: format!("input_{i}:0"), tensor: list.add(t) })
        .collect();
    let req = RunStepRequest {
        session_handle: "sess-0123456789".into(),
        feeds,
        fetches: vec!["output:0".into(), "loss:0".into()],
        targets: vec!["train_op".into()],
        options: RunOptions { timeout_ms: 1000, trace: false, cancel_id: 0 },
        partial_run_handle: String::new(),
    };
    (message::encode(&req).unwrap().to_vec(), list.into_vec())
}

fn codec(c: &mut Criterion) {
    let limits = FrameLimits::default();
    let tensors: Vec<Tensor> = (0..4).map(|i| Tensor::build::<f32>([256], |s| s.fill(i as f32)).unwrap()).collect();
    let (meta, payloads) = run_step(&tensors);
    c.bench_function("frame_encode_runstep_4x1KiB", |b| {
        b.iter(|| {
            let frame = OutgoingFrame::new(FrameKind::Request, 4, 1, black_box(&meta), &payloads, &limits).unwrap();
            black_box(frame.io_slices().len())
        })
    });
    let wire = OutgoingFrame::new(FrameKind::Request, 4, 1, &meta, &payloads, &limits).unwrap().to_vec();
    let mut reader = FrameReader::new(limits, 256 << 10, None).unwrap();
    c.bench_function("frame_decode_in_place_runstep_4x1KiB", |b| {
        b.iter(|| {
            let frames = reader.feed(black_box(&wire)).unwrap();
            black_box(frames[0].payloads().len())
        })
    });
    c.bench_function("message_view_validated_runstep", |b| {
        b.iter(|| {
            let view = message::view::<RunStepRequest>(black_box(&meta)).unwrap();
            black_box(view.feeds.len())
        })
    });
}

criterion_group!(benches, codec);
criterion_main!(benches);
