//! The one ringflow binary (commands are added as the layers land).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    println!("ringflow {}", env!("CARGO_PKG_VERSION"));
}
