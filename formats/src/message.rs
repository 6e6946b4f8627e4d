//! The message union stored in `message` entries (typed view for writers and providers).
