mod child;
mod common;
mod conformance;
mod jsonl_files;
mod processes;
mod transfer;
