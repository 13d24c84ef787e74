//! The one binary's commands: `run`, `verify`, `bench`, `demo` (and, with
//! the distributed runtime, `server` and `devices`).
//!
//! Owns: argument parsing (clap) and the commands' output. Each command's
//! work lives in its own file; this one only dispatches.

pub mod bench_inproc;
pub mod run;
pub mod verify;

use crate::bench::{Figure, print_figures};
use crate::error::{Result, Status};
use crate::session::{SessionOptions, create_session};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "ringflow", version, about = "A distributed dataflow-graph runtime, rebuilt for latency")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one step of a GraphDef in process and print (or write) the fetches.
    Run {
        /// Binary GraphDef (.pb).
        #[arg(long)]
        graph: PathBuf,
        /// NAME=FILE.npy, e.g. x:0=feeds/x.npy (repeatable).
        #[arg(long = "feed")]
        feeds: Vec<String>,
        /// Tensor to fetch, e.g. y:0 (repeatable).
        #[arg(long = "fetch")]
        fetches: Vec<String>,
        /// Op to run as a target, e.g. init (repeatable).
        #[arg(long = "op")]
        targets: Vec<String>,
        /// Write each fetch as DIR/NAME.npy instead of printing it.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Session target ("" = in process).
        #[arg(long, default_value = "")]
        target: String,
    },
    /// Check golden case directories (graph.pb + case.json) against their
    /// expected outputs; exits 0 only if all pass.
    Verify {
        /// Session target ("" = in process).
        #[arg(long, default_value = "")]
        target: String,
        /// Case directories.
        #[arg(required = true)]
        cases: Vec<PathBuf>,
    },
    /// Measure step latency, per-node cost and parallel speedup.
    Bench {
        /// Scenarios: step-inproc, chain, fanout (default: all of these).
        scenarios: Vec<String>,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
        /// Measured iterations per scenario (0: the scenario's default).
        #[arg(long, default_value_t = 0)]
        iters: usize,
        /// Pool threads for the parallel scenario (0: all cores).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
    /// Run a bundled multi-layer graph and report its outputs and step latency.
    Demo {
        /// Steps to time.
        #[arg(long, default_value_t = 3000)]
        steps: usize,
    },
}

fn exit_code(result: Result<bool>) -> i32 {
    match result {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// Parses arguments, runs the command, returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    exit_code(dispatch(cli.command))
}

fn dispatch(command: Command) -> Result<bool> {
    match command {
        Command::Run { graph, feeds, fetches, targets, out, target } => {
            let outputs = run::run(&run::RunArgs { graph, feeds, fetches, targets, out: out.clone(), target })?;
            match out {
                Some(dir) => {
                    for (name, _) in &outputs {
                        println!("{name} -> {}", dir.join(run::output_file_name(name)).display());
                    }
                }
                None => {
                    for (name, tensor) in &outputs {
                        println!("{name} ({} {}):\n{tensor}", tensor.dtype(), tensor.shape());
                    }
                }
            }
            Ok(true)
        }
        Command::Verify { target, cases } => {
            let mut all_passed = true;
            for dir in &cases {
                let name =
                    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
                let result = verify::verify_case(dir, &|case| {
                    let options = SessionOptions { target: target.clone(), ..SessionOptions::default() };
                    create_session(case.graph.clone(), &options)
                });
                match result {
                    Ok(()) => println!("PASS {name}"),
                    Err(e) => {
                        all_passed = false;
                        println!("FAIL {name}: {e}");
                    }
                }
            }
            Ok(all_passed)
        }
        Command::Bench { scenarios, json, iters, threads } => {
            let scenarios = if scenarios.is_empty() {
                vec!["step-inproc".into(), "chain".into(), "fanout".into()]
            } else {
                scenarios
            };
            let mut figures: Vec<Figure> = Vec::new();
            for scenario in &scenarios {
                let opts = bench_inproc::BenchOptions { iters, threads };
                let mut found = match scenario.as_str() {
                    "step-inproc" => bench_inproc::step_inproc(&opts)?,
                    "chain" => bench_inproc::chain(&opts)?,
                    "fanout" => bench_inproc::fanout(&opts)?,
                    other => {
                        return Err(Status::invalid_argument(format!("unknown bench scenario '{other}'")));
                    }
                };
                if !json {
                    // Print as we go: some scenarios take a while.
                    print_figures(&found, false);
                }
                figures.append(&mut found);
            }
            if json {
                print_figures(&figures, true);
            }
            Ok(true)
        }
        Command::Demo { steps } => bench_inproc::demo(steps).map(|()| true),
    }
}
