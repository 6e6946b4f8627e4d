//! The session engine: the tree, context building, compaction, the agent loop,
//! providers and tools.
//!
//! Data flows one way: `pi-formats` (bytes) → `pi-storage` (stores) → here → the CLI.

pub mod agent;
pub mod compaction;
pub mod config;
pub mod context;
pub mod export;
pub mod js;
pub mod llm;
pub mod session;
pub mod tools;
