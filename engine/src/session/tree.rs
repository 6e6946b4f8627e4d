//! Paths and the tree, without recursion whose depth follows the input.

use super::marks::PathMarks;
use super::{EntryIdx, Parent, Session};
use std::cmp::Ordering;

/// A root-first path of entries, and the cycle that cut it short, if any.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathWalk {
    pub entries: Vec<EntryIdx>,
    /// Ids along a parent cycle, starting at the walk's start and ending with the
    /// first repeated id. Pi loops forever here; we stop before the repeat.
    pub cycle: Option<Vec<String>>,
    /// Where the entries context building looks for last sit on `entries` (valid
    /// while `entries` is left as walked; see [`PathWalk::marks`]).
    marks: PathMarks,
}

impl PathWalk {
    /// The marks of `entries`, unless `entries` was changed since the walk.
    pub fn marks(&self) -> Option<&PathMarks> {
        (self.marks.len() == self.entries.len()).then_some(&self.marks)
    }
}

/// One node of the tree view: an entry and its children (sorted by timestamp).
#[derive(Debug, Clone, PartialEq)]
pub struct TreeNode {
    pub idx: EntryIdx,
    pub children: Vec<EntryIdx>,
}

/// The whole tree as flat adjacency: `children[idx]` lists an entry's children.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub roots: Vec<EntryIdx>,
    pub children: Vec<Vec<EntryIdx>>,
}

/// How far up from a new leaf the memo is looked for (a turn appends a few entries).
const MEMO_REACH: usize = 64;

/// The last acyclic path walked, by its start entry, with its marks. Cleared
/// whenever an id gets shadowed (parent links may then resolve elsewhere); appends
/// of fresh ids leave every walked link as it was, so the memo stays a valid prefix
/// and is extended in place by the entries appended below its start.
#[derive(Debug, Default)]
pub(super) struct BranchMemo(std::sync::Mutex<Option<Memo>>);

#[derive(Debug, Clone)]
struct Memo {
    start: EntryIdx,
    entries: Vec<EntryIdx>,
    marks: PathMarks,
}

impl Memo {
    fn walk(&self) -> PathWalk {
        PathWalk {
            entries: self.entries.clone(),
            cycle: None,
            marks: self.marks,
        }
    }
}

impl Clone for BranchMemo {
    fn clone(&self) -> Self {
        BranchMemo(std::sync::Mutex::new(self.lock().clone()))
    }
}

impl BranchMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Memo>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn clear(&self) {
        *self.lock() = None;
    }
}

impl Session {
    /// Pi's `getBranch(fromId)`: from an entry up to the root, returned root-first.
    pub fn path_to(&self, start: Option<EntryIdx>) -> PathWalk {
        let Some(start) = start else {
            return PathWalk::default();
        };
        if let Some(walk) = self.path_from_memo(start) {
            return walk;
        }
        let walk = self.walk_to_root(start);
        // A path that ends in a dangling parent id is not memoized: appending an entry
        // with that id would extend it at the root, which no memo can see.
        let ends_at_root = walk
            .entries
            .first()
            .is_some_and(|&root| self.entry(root).parent.id().is_none());
        if walk.cycle.is_none() && ends_at_root {
            *self.branch_memo.lock() = Some(Memo {
                start,
                entries: walk.entries.clone(),
                marks: walk.marks,
            });
        }
        walk
    }

    /// The path to `start` as the memo plus the few entries between it and `start`,
    /// when `start` descends from the memo's start within [`MEMO_REACH`] steps; the
    /// memo moves on to `start`. A repeat on the way up never reaches the memo's start
    /// (whose own path has no cycle), so it falls back to the full walk, which reports
    /// the cycle.
    fn path_from_memo(&self, start: EntryIdx) -> Option<PathWalk> {
        let mut guard = self.branch_memo.lock();
        let memo = guard.as_mut()?;
        let mut tail = Vec::new();
        let mut current = Some(start);
        for _ in 0..=MEMO_REACH {
            let idx = current?;
            if idx == memo.start {
                for &idx in tail.iter().rev() {
                    memo.entries.push(idx);
                    memo.marks.push(self.entry(idx));
                }
                memo.start = start;
                return Some(memo.walk());
            }
            tail.push(idx);
            current = self.parent_of(idx);
        }
        None
    }

    fn walk_to_root(&self, start: EntryIdx) -> PathWalk {
        let mut walk = PathWalk::default();
        // A bitmap sized to the session is cheaper than hashing on long chains.
        let mut seen = vec![false; self.entries.len()];
        let mut current = Some(start);
        while let Some(idx) = current {
            if std::mem::replace(&mut seen[idx as usize], true) {
                let mut ids: Vec<String> = walk.entries.iter().map(|&i| self.id_text(i)).collect();
                ids.push(self.id_text(idx));
                walk.cycle = Some(ids);
                break;
            }
            walk.entries.push(idx);
            current = self.parent_of(idx);
        }
        walk.entries.reverse();
        walk.marks = PathMarks::of(walk.entries.iter().map(|&i| self.entry(i)));
        walk
    }

    /// The active branch: the path from the leaf (Pi's `getBranch()`).
    pub fn branch_path(&self) -> PathWalk {
        self.path_to(self.leaf)
    }

    /// Pi's `buildSessionPath`: like the branch, but a missing leaf falls back to the
    /// last entry in file order (only an explicitly reset leaf gives an empty path).
    pub fn context_path(&self, leaf: LeafChoice<'_>) -> PathWalk {
        let start = match leaf {
            LeafChoice::Current => self.leaf,
            LeafChoice::Id(id) => self
                .find(id)
                .or_else(|| self.entries.len().checked_sub(1).map(|i| i as EntryIdx)),
        };
        self.path_to(start)
    }

    fn id_text(&self, idx: EntryIdx) -> String {
        self.entries[idx as usize]
            .id
            .as_deref()
            .unwrap_or("<no id>")
            .to_string()
    }

    /// Pi's `getTree()`: roots in file order (entries with a null or self parent, and
    /// orphans whose parent is unknown), children sorted by timestamp, oldest first.
    /// Entries caught in a parent cycle are reachable from no root and are left out,
    /// as in Pi; `verify` reports them.
    pub fn tree(&self) -> Tree {
        let n = self.entries.len();
        let mut tree = Tree {
            roots: Vec::new(),
            children: vec![Vec::new(); n],
        };
        for (i, record) in self.entries.iter().enumerate() {
            let idx = i as EntryIdx;
            let is_root = match &record.parent {
                Parent::Root => true,
                Parent::Id(p) => record.id.as_deref() == Some(p),
                _ => false,
            };
            if is_root {
                tree.roots.push(idx);
                continue;
            }
            match record.parent.id().and_then(|p| self.find(p)) {
                Some(parent) => tree.children[parent as usize].push(idx),
                None => tree.roots.push(idx),
            }
        }
        let times: Vec<Option<f64>> = self
            .entries
            .iter()
            .map(|r| {
                r.timestamp
                    .as_deref()
                    .and_then(pi_formats::time::parse_millis)
            })
            .collect();
        for list in tree.children.iter_mut().filter(|l| l.len() > 1) {
            sort_by_time(list, &times);
        }
        tree
    }
}

/// Which leaf context building starts from.
#[derive(Debug, Clone, Copy)]
pub enum LeafChoice<'a> {
    /// The session's current leaf (`None` after `reset_leaf`).
    Current,
    /// A given id; unknown ids fall back to the last entry, as in Pi.
    Id(&'a str),
}

/// JS `Array.prototype.sort` by `Date` value: stable, and an invalid date compares
/// equal to everything (the comparator yields NaN). That is not a total order, so
/// such lists use a binary insertion sort like V8's instead of Rust's sort, which
/// may panic on inconsistent comparisons.
fn sort_by_time(list: &mut [EntryIdx], times: &[Option<f64>]) {
    let key = |idx: EntryIdx| times[idx as usize];
    if list.iter().all(|&i| key(i).is_some()) {
        // Every key is present (checked above).
        let time = |i: EntryIdx| key(i).unwrap_or_default();
        list.sort_by(|&a, &b| time(a).total_cmp(&time(b)));
        return;
    }
    let compare = |a: EntryIdx, b: EntryIdx| match (key(a), key(b)) {
        (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        _ => Ordering::Equal,
    };
    for start in 1..list.len() {
        let pivot = list[start];
        let (mut left, mut right) = (0, start);
        while left < right {
            let mid = left + (right - left) / 2;
            if compare(pivot, list[mid]) == Ordering::Less {
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        list.copy_within(left..start, left + 1);
        list[left] = pivot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insertion_sort_with_invalid_dates_is_stable_and_total() {
        let times = vec![Some(3.0), None, Some(1.0), Some(2.0)];
        let mut list = vec![0, 1, 2, 3];
        sort_by_time(&mut list, &times);
        assert_eq!(list.len(), 4);
        let mut sorted = list.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
    }
}
