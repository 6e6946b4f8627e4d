//! The agent runtime: providers (`llm`), tools, configuration and the agent loop.
//!
//! It sits on top of the pure session core (`pi-engine`: tree, context, compaction, export)
//! and is the only layer that talks to the network or runs processes. Front ends (`pi-cli`)
//! drive it; data flows one way: formats → storage → engine → agent → cli.

// Unsafe code only at the few syscalls that say why (signals to process groups, access(2)).
#![deny(unsafe_code)]

pub mod agent;
pub mod codemode;
pub mod collation;
pub mod config;
pub mod extensions;
pub mod host;
pub mod llm;
pub mod mcp;
pub mod packages;
pub mod protocol;
pub mod tools;
