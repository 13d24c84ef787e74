//! Fuzzes the shared-memory channel against a hostile peer that writes
//! anything anywhere in the region between our polls and sends (see
//! `ringflow::net::shm::fuzzing`). Nothing may panic, hang or read or
//! write outside the region.
//!
//! Run: `cargo +nightly fuzz run shm_ring fuzz/seeds/shm_ring`

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(ringflow::net::shm::fuzzing::hostile_peer(data));
});
