//! (placeholder: broadcasting helpers)
