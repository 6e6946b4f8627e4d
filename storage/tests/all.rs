//! All integration tests, built into one binary (see tests/suite/).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
