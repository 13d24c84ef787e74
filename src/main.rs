//! The one ringflow binary: master, worker or client by how it is invoked.
//! Everything lives in the library (the global allocator, mimalloc, is set
//! in `ringflow::alloc`); this file sets up logging and hands over to `cli`.

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RINGFLOW_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    std::process::exit(ringflow::cli::main());
}
