//! Fuzzes the frame decoder: a whole frame decoded from bytes (header,
//! payload table, tensors over the buffer), the metadata validated as every
//! method's request and response, and the same bytes fed to the streaming
//! reader in pieces. Nothing may panic, hang or read out of bounds.
//!
//! Run: `cargo +nightly fuzz run frame_decoder fuzz/seeds/frame_decoder`
//! (or `RUSTC_BOOTSTRAP=1 cargo fuzz run ...` on a stable toolchain).

#![no_main]

use libfuzzer_sys::fuzz_target;
use ringflow::net::frame::{FrameLimits, decode_frame};
use ringflow::net::message::{self, Method};
use ringflow::net::reader::FrameReader;

fuzz_target!(|data: &[u8]| {
    // Small caps so the fuzzer explores limits rather than allocations.
    let limits = FrameLimits {
        max_frame_bytes: 1 << 20,
        max_payloads: 64,
    };
    // First byte: the piece size for the streaming reader; the rest: bytes.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    if let Ok(frame) = decode_frame(rest, &limits) {
        for method in Method::ALL {
            let _ = message::validate_request(method, frame.meta_bytes());
            let _ = message::validate_response(method, frame.meta_bytes());
        }
        let mut checksum = 0u8;
        for tensor in frame.payloads() {
            checksum ^= tensor.as_bytes().iter().fold(0u8, |a, b| a ^ b);
            let _ = tensor.to_f64_vec();
        }
        std::hint::black_box(checksum);
    }
    let Ok(mut reader) = FrameReader::new(limits, 4096, None) else {
        return;
    };
    let piece = usize::from(split).max(1);
    for chunk in rest.chunks(piece) {
        match reader.feed(chunk) {
            Ok(frames) => {
                for frame in frames {
                    std::hint::black_box(frame.meta_bytes().len());
                }
            }
            Err(_) => break,
        }
    }
});
