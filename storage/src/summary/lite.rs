//! The few parts of a `message` entry a summary needs, read in one serde_json pass that
//! builds no payload.
//!
//! Every value is walked with `deserialize_any`, as `serde_json::Value` would be, so a line
//! is accepted or refused exactly as [`pi_formats::jsonl::parse_value`] does it (number
//! range, escapes, UTF-8, nesting); values that do not matter are dropped as they are read
//! instead of being copied into a tree. Duplicate keys: the last one wins, as in `Value`.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::js_string;

/// A `message` entry, reduced.
pub(super) struct Entry {
    pub message: Message,
    pub timestamp: Stamp,
}

/// The entry's `message`.
pub(super) enum Message {
    /// Missing or `null`.
    Missing,
    NotObject,
    Object(MessageFields),
}

pub(super) struct MessageFields {
    pub role: Role,
    /// `None` when there is no `content` key.
    pub content: Option<Content>,
    pub timestamp: Stamp,
}

#[derive(Clone, Copy)]
pub(super) enum Role {
    User,
    Assistant,
    OtherString,
    /// Missing or not a string.
    NotString,
}

pub(super) enum Content {
    /// A string; the text only when asked for.
    String(Option<String>),
    /// An array: whether an element is `null`, and (when asked for) the `text` of each
    /// element whose `type` is `"text"`, as `Array.prototype.join` shows it.
    Array {
        has_null: bool,
        texts: Option<Vec<String>>,
    },
    /// Any other value (`null` included).
    Other,
}

/// A `timestamp` value.
pub(super) enum Stamp {
    String(String),
    Number(f64),
    /// Missing or of another type.
    Other,
}

/// Parses a `message` line; `want_text` asks for the content's text. Accepts what
/// [`pi_formats::jsonl::parse_value`] accepts, through the same retries
/// ([`pi_formats::jsonl::parse_like_js`]). `None` when it refuses the line.
pub(super) fn parse_entry(line: &[u8], want_text: bool) -> Option<Entry> {
    let seed = EntrySeed { want_text };
    let run = |bytes: &[u8]| {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let entry = seed.deserialize(&mut de)?;
        de.end().map(|()| entry)
    };
    pi_formats::jsonl::parse_like_js(line, run).ok()
}

/// Implements the visits of scalars and containers that only need to be consumed.
macro_rules! skip_scalars {
    ($value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// Any JSON value, validated and dropped.
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    skip_scalars!(());
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skip)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
}

/// Reads a map key as one of `names` (its index), or `None` for any other key.
struct Key(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| *n == key))
    }
}

#[derive(Clone, Copy)]
struct EntrySeed {
    want_text: bool,
}

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = Entry;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = Entry;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an entry")
    }
    skip_scalars!(Entry {
        message: Message::Missing,
        timestamp: Stamp::Other,
    });
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Entry, A::Error> {
        Skip.visit_seq(seq)?;
        Ok(Entry {
            message: Message::Missing,
            timestamp: Stamp::Other,
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut entry = Entry {
            message: Message::Missing,
            timestamp: Stamp::Other,
        };
        while let Some(key) = map.next_key_seed(Key(&["message", "timestamp"]))? {
            match key {
                Some(0) => {
                    entry.message = map.next_value_seed(MessageSeed {
                        want_text: self.want_text,
                    })?
                }
                Some(_) => entry.timestamp = map.next_value_seed(StampSeed)?,
                None => map.next_value_seed(Skip)?,
            }
        }
        Ok(entry)
    }
}

struct MessageSeed {
    want_text: bool,
}

impl<'de> DeserializeSeed<'de> for MessageSeed {
    type Value = Message;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Message, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MessageSeed {
    type Value = Message;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Message, E> {
        Ok(Message::NotObject)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Message, E> {
        Ok(Message::NotObject)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Message, E> {
        Ok(Message::NotObject)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Message, E> {
        Ok(Message::NotObject)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Message, E> {
        Ok(Message::NotObject)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Message, E> {
        Ok(Message::Missing)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Message, A::Error> {
        Skip.visit_seq(seq)?;
        Ok(Message::NotObject)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut fields = MessageFields {
            role: Role::NotString,
            content: None,
            timestamp: Stamp::Other,
        };
        while let Some(key) = map.next_key_seed(Key(&["role", "content", "timestamp"]))? {
            match key {
                Some(0) => fields.role = map.next_value_seed(RoleSeed)?,
                Some(1) => {
                    fields.content = Some(map.next_value_seed(ContentSeed {
                        want_text: self.want_text,
                    })?)
                }
                Some(_) => fields.timestamp = map.next_value_seed(StampSeed)?,
                None => map.next_value_seed(Skip)?,
            }
        }
        Ok(Message::Object(fields))
    }
}

struct RoleSeed;

impl<'de> DeserializeSeed<'de> for RoleSeed {
    type Value = Role;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Role, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RoleSeed {
    type Value = Role;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a role")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Role, E> {
        Ok(Role::NotString)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Role, E> {
        Ok(Role::NotString)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Role, E> {
        Ok(Role::NotString)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Role, E> {
        Ok(Role::NotString)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Role, E> {
        Ok(Role::NotString)
    }
    fn visit_str<E: de::Error>(self, role: &str) -> Result<Role, E> {
        Ok(match role {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            _ => Role::OtherString,
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Role, A::Error> {
        Skip.visit_seq(seq)?;
        Ok(Role::NotString)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Role, A::Error> {
        Skip.visit_map(map)?;
        Ok(Role::NotString)
    }
}

struct StampSeed;

impl<'de> DeserializeSeed<'de> for StampSeed {
    type Value = Stamp;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Stamp, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StampSeed {
    type Value = Stamp;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a timestamp")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Stamp, E> {
        Ok(Stamp::Other)
    }
    // As `serde_json::Number::as_f64`.
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Stamp, E> {
        Ok(Stamp::Number(n as f64))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Stamp, E> {
        Ok(Stamp::Number(n as f64))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Stamp, E> {
        Ok(Stamp::Number(n))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Stamp, E> {
        Ok(Stamp::Other)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Stamp, E> {
        Ok(Stamp::String(s.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Stamp, A::Error> {
        Skip.visit_seq(seq)?;
        Ok(Stamp::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Stamp, A::Error> {
        Skip.visit_map(map)?;
        Ok(Stamp::Other)
    }
}

struct ContentSeed {
    want_text: bool,
}

impl<'de> DeserializeSeed<'de> for ContentSeed {
    type Value = Content;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Content, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ContentSeed {
    type Value = Content;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Content, E> {
        Ok(Content::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Content, E> {
        Ok(Content::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Content, E> {
        Ok(Content::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Content, E> {
        Ok(Content::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
        Ok(Content::Other)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Content, E> {
        Ok(Content::String(self.want_text.then(|| s.to_string())))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Content, A::Error> {
        Skip.visit_map(map)?;
        Ok(Content::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
        let mut has_null = false;
        let mut texts = self.want_text.then(Vec::new);
        while let Some(block) = seq.next_element_seed(BlockSeed {
            want_text: self.want_text,
        })? {
            match block {
                Block::Null => has_null = true,
                Block::Text(text) => {
                    if let Some(texts) = texts.as_mut() {
                        texts.push(text);
                    }
                }
                Block::Other => {}
            }
        }
        Ok(Content::Array { has_null, texts })
    }
}

enum Block {
    Null,
    /// An object whose `type` is `"text"`: its `text` as `join` shows it (empty unless asked).
    Text(String),
    Other,
}

struct BlockSeed {
    want_text: bool,
}

impl<'de> DeserializeSeed<'de> for BlockSeed {
    type Value = Block;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Block, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BlockSeed {
    type Value = Block;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Block, E> {
        Ok(Block::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Block, E> {
        Ok(Block::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Block, E> {
        Ok(Block::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Block, E> {
        Ok(Block::Other)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Block, E> {
        Ok(Block::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Block, E> {
        Ok(Block::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Block, A::Error> {
        Skip.visit_seq(seq)?;
        Ok(Block::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
        let mut is_text = false;
        let mut text: Option<Value> = None;
        while let Some(key) = map.next_key_seed(Key(&["type", "text"]))? {
            match key {
                Some(0) => is_text = map.next_value_seed(IsText)?,
                Some(_) if self.want_text => text = Some(map.next_value::<Value>()?),
                _ => map.next_value_seed(Skip)?,
            }
        }
        Ok(if is_text {
            Block::Text(text.as_ref().map(js_string).unwrap_or_default())
        } else {
            Block::Other
        })
    }
}

/// Whether a value is the string `"text"`.
struct IsText;

impl<'de> DeserializeSeed<'de> for IsText {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IsText {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a block type")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
        Ok(s == "text")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        Skip.visit_seq(seq)?;
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        Skip.visit_map(map)?;
        Ok(false)
    }
}
