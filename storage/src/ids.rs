//! Typed ids, so a session id is never passed where an entry id belongs.

use std::borrow::Borrow;
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps an id as it appears in a session file. Any string is accepted:
            /// files written by hand or by old versions carry ids of every shape.
            pub fn new(id: impl Into<String>) -> Self {
                $name(id.into())
            }

            /// The id text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                $name(id.to_string())
            }
        }
    };
}

string_id!(
    /// A session's id: the `id` of its header line.
    SessionId
);

string_id!(
    /// An entry's `id` (8 hex chars when Pi made it; anything in hand-edited files).
    EntryId
);
