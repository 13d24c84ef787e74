//! The one ringflow binary. The global allocator (mimalloc) is set in
//! `ringflow::alloc`; commands live in `ringflow::cli`.

use clap::Parser;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RINGFLOW_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = ringflow::cli::Cli::parse();
    if let Err(status) = ringflow::cli::run(cli) {
        eprintln!("error: {status}");
        std::process::exit(1);
    }
}
