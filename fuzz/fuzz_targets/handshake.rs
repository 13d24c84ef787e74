//! Any bytes as a peer's first frames, to a server with and without a
//! cluster secret: refused or accepted, never a panic, never more than the
//! hello budget read.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let with_secret = data.first().is_some_and(|b| b & 1 == 1);
    ringflow::net::rpc::handshake::fuzz_server_handshake(data, with_secret);
});
