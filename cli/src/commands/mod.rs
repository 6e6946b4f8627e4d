//! One module per command group.

pub mod auth;
pub mod mcp;
pub mod mcp_login;
pub mod sessions;
