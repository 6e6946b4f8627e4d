//! /resume's message search, answered by the store's history index (`pi_storage::history`,
//! the index `pi sessions search` uses), opened and brought up to date once per picker.

use std::collections::HashSet;

use pi_storage::history::{HistoryIndex, HistorySource};
use pi_storage::{StoreOptions, StoreSpec};

/// The open index while a /resume picker is up.
#[derive(Debug, Default)]
pub struct SessionSearch {
    index: Option<HistoryIndex>,
    /// Why the index could not be used (asked once per picker, not on every key).
    failed: Option<String>,
}

impl SessionSearch {
    /// Forgets the index, so the next picker reads sessions written since.
    pub fn reset(&mut self) {
        *self = SessionSearch::default();
    }

    /// Locations of the sessions whose user or assistant text matches `query` (the index's
    /// query language). `Err` names why the index cannot be used; the picker then matches
    /// the first message only.
    pub fn sessions_matching(
        &mut self,
        store: &(StoreSpec, StoreOptions),
        query: &str,
    ) -> Result<HashSet<String>, String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        if self.index.is_none() {
            match open(&store.0, &store.1) {
                Ok(index) => self.index = Some(index),
                Err(why) => {
                    self.failed = Some(why.clone());
                    return Err(why);
                }
            }
        }
        let index = self.index.as_ref().ok_or("no index")?;
        index
            .sessions_with_message_text(query)
            .map_err(|e| e.to_string())
    }
}

/// Opens the history index of the store and indexes what changed since its last use. No
/// progress is printed: the UI owns the terminal.
fn open(spec: &StoreSpec, options: &StoreOptions) -> Result<HistoryIndex, String> {
    let source = HistorySource::open(spec, options).map_err(|e| e.to_string())?;
    let path = source.index_path(spec, options);
    let (index, _) = source.open_index(&path).map_err(|e| e.to_string())?;
    Ok(index)
}
