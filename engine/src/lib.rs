//! The session core: the tree, context building, compaction and branch summaries, export.
//!
//! Pure: no HTTP, no terminal, no processes. The model is reached only through the
//! [`compaction::Summarizer`] trait, which the agent runtime (`pi-agent`) implements.
//! Data flows one way: `pi-formats` (bytes) → `pi-storage` (stores) → here → `pi-agent` → the CLI.

pub mod compaction;
pub mod context;
pub mod export;
pub mod js;
pub mod session;
