mod child;
mod common;
mod conformance;
mod jsonl_files;
mod pg_server;
mod postgres;
mod processes;
mod transfer;
