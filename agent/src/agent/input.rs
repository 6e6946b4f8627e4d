//! Messages that enter a conversation from outside the model: what the user typed and the
//! custom messages extensions send (`pi.sendMessage`). Either can start a run or wait in the
//! steering and follow-up queues; the loop records each the way Pi does (a `message` entry
//! with a user message, or a `custom_message` entry).

use serde_json::Value;

/// A message for the agent from the user or from an extension.
#[derive(Debug, Clone, PartialEq)]
pub enum InputMessage {
    /// A user message: its text and image blocks.
    User {
        /// The text.
        text: String,
        /// Image blocks (`{type: "image", data, mimeType}`).
        images: Vec<Value>,
    },
    /// An extension's custom message (`{customType, content, display, details}`), which the
    /// model sees as a user message with its content.
    Custom(Value),
}

impl InputMessage {
    /// A user message without images.
    pub fn user(text: impl Into<String>) -> InputMessage {
        InputMessage::User {
            text: text.into(),
            images: Vec::new(),
        }
    }

    /// The text of a user message; `None` for a custom message. Pi's queue views
    /// (`queue_update`, `clear_queue`) show user messages only.
    pub fn user_text(&self) -> Option<&str> {
        match self {
            InputMessage::User { text, .. } => Some(text),
            InputMessage::Custom(_) => None,
        }
    }
}

impl From<String> for InputMessage {
    fn from(text: String) -> InputMessage {
        InputMessage::user(text)
    }
}

impl From<&str> for InputMessage {
    fn from(text: &str) -> InputMessage {
        InputMessage::user(text)
    }
}
