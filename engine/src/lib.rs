//! The session core: the tree, context building, compaction and branch summaries, export.
//!
//! Pure: no HTTP, no terminal, no processes. The model is reached only through the
//! [`compaction::Summarizer`] trait, which the agent runtime (`pi-agent`) implements.
//! Data flows one way: `pi-formats` (bytes) → `pi-storage` (stores) → here → `pi-agent` → the CLI.

// Unsafe code only where a module says why (the session text's memory map).
#![deny(unsafe_code)]

pub mod compaction;
pub mod context;
pub mod export;
pub mod js;
pub mod session;
