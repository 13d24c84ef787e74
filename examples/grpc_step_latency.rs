//! The trivial step `y = x + 1` through a Rust client against a running
//! server, over the native protocol and over gRPC (TensorFlow's
//! MasterService), taking turns: what the gRPC front end adds to a step,
//! without Python. `tools/tf-client/bench.py --rust-probe` runs it.
//!
//!     cargo run --release --example grpc_step_latency -- HOST:PORT [STEPS]

use ringflow::Tensor;
use ringflow::session::{SessionExt, SessionOptions, create_session};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address = std::env::args().nth(1).ok_or("usage: grpc_step_latency HOST:PORT [STEPS]")?;
    let steps: usize = std::env::args().nth(2).map_or(Ok(3000), |s| s.parse())?;
    let mut times: Vec<(&str, Vec<u128>)> = vec![("ringflow", Vec::new()), ("grpc", Vec::new())];
    for _round in 0..2 {
        for (scheme, samples) in &mut times {
            let options =
                SessionOptions { target: format!("{scheme}://{address}"), local_shortcut: false, ..Default::default() };
            let session = create_session(ringflow::graph::builder::trivial_add_graph(), &options)?;
            for i in 0..steps {
                let started = Instant::now();
                let y = session.run_simple(&[("x:0", Tensor::scalar(i as f32))], &["y:0"], &[])?;
                samples.push(started.elapsed().as_nanos());
                assert_eq!(y[0].scalar_value::<f32>()?, i as f32 + 1.0);
            }
            session.close()?;
        }
    }
    for (scheme, samples) in &mut times {
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
        println!("{scheme} p50_us {:.1} p99_us {:.1}", at(0.5), at(0.99));
    }
    Ok(())
}
