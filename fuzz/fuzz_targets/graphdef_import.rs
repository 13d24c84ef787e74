//! Any bytes as a binary GraphDef: imported and validated, or an error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = ringflow::graph::graph_from_pb_bytes(data) {
        let _ = ringflow::graph::Graph::build(spec);
    }
});
