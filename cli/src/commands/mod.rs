//! One module per command group.

pub mod api_key_flow;
pub mod auth;
pub mod auth_api_key;
pub mod auth_credentials;
mod auth_extension;
pub mod mcp;
pub mod mcp_login;
pub mod package_config;
pub mod packages;
pub mod radius_mcp;
pub mod sessions;
