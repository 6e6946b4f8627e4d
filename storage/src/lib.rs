//! Session stores.
