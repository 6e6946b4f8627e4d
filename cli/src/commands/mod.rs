//! One module per command group.

pub mod mcp;
pub mod package_config;
pub mod packages;
pub mod sessions;
