//! Shared helpers for the criterion benchmarks (corpus generation).
