//! The command line (the part the transport needs today): `bench` and the
//! hidden `__net-peer` the benchmarks start as their other process.
//!
//! Owns: argument parsing and dispatch only; every command's work lives in
//! its layer (`net::bench` here).

use crate::bench::print_figures;
use crate::error::{Result, Status};
use crate::net::bench::{self, BenchOptions, PeerArgs};
use crate::net::io::TransportKind;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "ringflow",
    version,
    about = "Distributed dataflow-graph runtime"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure scenarios (pingpong, bulk) against raw baselines.
    Bench {
        /// Scenarios to run: pingpong, bulk.
        #[arg(required = true)]
        scenarios: Vec<String>,
        /// One JSON object per figure.
        #[arg(long)]
        json: bool,
        /// Bulk tensor size (e.g. 64MiB, 2.5GiB).
        #[arg(long)]
        size: Option<String>,
        /// Round trips (pingpong) or transfers (bulk) measured.
        #[arg(long)]
        iterations: Option<usize>,
        /// Transports: uring, socket (default: both).
        #[arg(long, value_delimiter = ',')]
        transport: Vec<String>,
        /// Bounded spin before sleeping, microseconds.
        #[arg(long)]
        spin_us: Option<u64>,
        /// Zero-copy send for frames with at least this many payload bytes
        /// (a size, or `off`).
        #[arg(long)]
        zerocopy_min: Option<String>,
    },
    /// The other process of a benchmark (internal).
    #[command(name = "__net-peer", hide = true)]
    NetPeer {
        mode: String,
        #[arg(long, default_value = "auto")]
        transport: String,
        #[arg(long, default_value_t = 64)]
        msg_bytes: usize,
        #[arg(long, default_value_t = 100)]
        spin_us: u64,
    },
}

/// Parses `64MiB`, `2.5GiB`, `1000`, `16KB` into bytes.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| Status::invalid_argument(format!("'{text}' is not a size")))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => {
            return Err(Status::invalid_argument(format!(
                "unknown size unit '{other}' in '{text}'"
            )));
        }
    };
    Ok((value * scale as f64).round() as u64)
}

fn parse_transport(text: &str) -> Result<TransportKind> {
    TransportKind::parse(text)
        .ok_or_else(|| Status::invalid_argument(format!("unknown transport '{text}'")))
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Bench {
            scenarios,
            json,
            size,
            iterations,
            transport,
            spin_us,
            zerocopy_min,
        } => {
            let mut opts = BenchOptions::default();
            if let Some(size) = size {
                opts.bulk_bytes = parse_size(&size)?;
                if opts.bulk_bytes >= 1 << 30 {
                    opts.bulk_iterations = 1; // a multi-GiB tensor crosses once
                }
            }
            if let Some(n) = iterations {
                opts.pingpong_iterations = n;
                opts.bulk_iterations = n;
            }
            if !transport.is_empty() {
                opts.transports = transport
                    .iter()
                    .map(|t| parse_transport(t))
                    .collect::<Result<_>>()?;
            }
            if let Some(zc) = zerocopy_min {
                opts.zerocopy_send_min_bytes = match zc.as_str() {
                    "off" | "never" => u64::MAX,
                    size => parse_size(size)?,
                };
            }
            if let Some(spin) = spin_us {
                opts.spin_us = spin;
            }
            let mut figures = Vec::new();
            for scenario in &scenarios {
                match scenario.as_str() {
                    "pingpong" => figures.extend(bench::bench_pingpong(&opts)?),
                    "bulk" => figures.extend(bench::bench_bulk(&opts)?),
                    other => {
                        return Err(Status::invalid_argument(format!(
                            "unknown bench scenario '{other}' (this build has: pingpong, bulk)"
                        )));
                    }
                }
            }
            print_figures(&figures, json);
            Ok(())
        }
        Command::NetPeer {
            mode,
            transport,
            msg_bytes,
            spin_us,
        } => bench::run_peer(&PeerArgs {
            mode,
            transport: parse_transport(&transport)?,
            msg_bytes,
            spin_us,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("2.5GiB").unwrap(), 5 << 29);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert_eq!(parse_size("16KB").unwrap(), 16_000);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3XB").is_err());
    }
}
