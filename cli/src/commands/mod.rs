//! One module per command group.

pub mod mcp;
pub mod sessions;
