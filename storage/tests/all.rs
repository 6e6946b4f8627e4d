//! All integration tests, built into one binary (see tests/suite/).
mod suite;
