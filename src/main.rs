//! The one ringflow binary (commands are added as the layers land). The
//! global allocator (mimalloc) is set in `ringflow::alloc`.

fn main() {
    println!("ringflow {}", env!("CARGO_PKG_VERSION"));
}
