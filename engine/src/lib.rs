//! Session engine.
