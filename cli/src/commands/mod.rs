//! One module per command group.

pub mod mcp;
pub mod mcp_login;
pub mod sessions;
