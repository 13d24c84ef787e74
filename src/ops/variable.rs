//! (placeholder: filled in by the kernels work)
#[allow(unused_imports)]
use super::registry::OpDef;

pub const DEFS: &[OpDef] = &[];
