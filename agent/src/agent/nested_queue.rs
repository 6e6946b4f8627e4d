//! When nested calls (a codemode script's `tools.x()`, an extension tool's
//! `ctx.executeTool()`) may run, as Pi's nested-call runner admits them: a call of a tool with
//! `executionMode: "sequential"` runs alone.
//!
//! - Among the calls one tool call makes (siblings), admission follows arrival order: calls of
//!   ordinary tools run together, a call of a sequential tool waits until every sibling that
//!   came before it has ended, and siblings that come after it wait until it has ended.
//! - Calls of sequential tools anywhere in the session run one at a time, except that the
//!   nested calls a sequential call makes (at any depth) do not wait for that call itself.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use tokio_util::sync::CancellationToken;

use super::lock;

/// The admission state of one session's nested calls.
#[derive(Default)]
pub(super) struct NestedQueue {
    /// Per calling tool call: its nested calls share the lock (ordinary ones) or take it
    /// alone (sequential ones). Tokio's lock is fair, so admission keeps arrival order.
    siblings: Mutex<HashMap<String, Arc<RwLock<()>>>>,
    /// Held by the sequential call that runs now.
    exclusive: Arc<tokio::sync::Mutex<()>>,
    /// Calls running under the held exclusive lease (the holder and its nested calls).
    holders: Mutex<HashSet<String>>,
}

/// A sibling admission: shared or exclusive.
enum SiblingGuard {
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Exclusive(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

/// A nested call's permission to run; dropping it lets the next calls in.
pub(super) struct Admission<'a> {
    queue: &'a NestedQueue,
    parent: String,
    call_id: String,
    sibling: Option<SiblingGuard>,
    lease: Option<OwnedMutexGuard<()>>,
    /// The call runs under the exclusive lease (its own or an ancestor's).
    holds: bool,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if self.holds {
            lock(&self.queue.holders).remove(&self.call_id);
        }
        self.lease.take();
        self.sibling.take();
        // The parent's lock is forgotten once no call holds or waits for it.
        let mut siblings = lock(&self.queue.siblings);
        if siblings
            .get(&self.parent)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            siblings.remove(&self.parent);
        }
    }
}

impl NestedQueue {
    /// Waits until the nested call `call_id` of `parent` may run (`sequential`: its tool
    /// runs alone). `None` when `cancel` fires first.
    pub(super) async fn admit(
        &self,
        parent: &str,
        call_id: &str,
        sequential: bool,
        cancel: &CancellationToken,
    ) -> Option<Admission<'_>> {
        let siblings = lock(&self.siblings)
            .entry(parent.to_string())
            .or_default()
            .clone();
        let mut admission = Admission {
            queue: self,
            parent: parent.to_string(),
            call_id: call_id.to_string(),
            sibling: None,
            lease: None,
            holds: false,
        };
        let sibling = async {
            if sequential {
                SiblingGuard::Exclusive(siblings.write_owned().await)
            } else {
                SiblingGuard::Shared(siblings.read_owned().await)
            }
        };
        admission.sibling = Some(tokio::select! {
            biased;
            _ = cancel.cancelled() => return None,
            guard = sibling => guard,
        });
        // A call below the lease holder runs under its lease.
        let inherited = lock(&self.holders).contains(parent);
        if sequential && !inherited {
            let lease = self.exclusive.clone().lock_owned();
            admission.lease = Some(tokio::select! {
                biased;
                _ = cancel.cancelled() => return None,
                guard = lease => guard,
            });
        }
        if inherited || admission.lease.is_some() {
            admission.holds = true;
            lock(&self.holders).insert(call_id.to_string());
        }
        Some(admission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Runs `calls` (parent, id, sequential) concurrently, each holding its admission for a
    /// moment; returns the most calls that ran at once while a sequential one ran.
    async fn overlap_with_sequential(calls: &[(&str, &str, bool)]) -> usize {
        let queue = Arc::new(NestedQueue::default());
        let running = Arc::new(AtomicUsize::new(0));
        let sequential_running = Arc::new(AtomicUsize::new(0));
        let worst = Arc::new(AtomicUsize::new(0));
        let tasks = calls.iter().map(|&(parent, id, sequential)| {
            let (queue, running, sequential_running, worst) = (
                queue.clone(),
                running.clone(),
                sequential_running.clone(),
                worst.clone(),
            );
            async move {
                let cancel = CancellationToken::new();
                let _admission = queue.admit(parent, id, sequential, &cancel).await.unwrap();
                running.fetch_add(1, Ordering::SeqCst);
                if sequential {
                    sequential_running.fetch_add(1, Ordering::SeqCst);
                }
                for _ in 0..5 {
                    if sequential_running.load(Ordering::SeqCst) > 0 {
                        worst.fetch_max(running.load(Ordering::SeqCst), Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if sequential {
                    sequential_running.fetch_sub(1, Ordering::SeqCst);
                }
                running.fetch_sub(1, Ordering::SeqCst);
            }
        });
        futures::future::join_all(tasks).await;
        worst.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_sequential_sibling_runs_alone() {
        let calls = [
            ("p", "p/1", false),
            ("p", "p/2", true),
            ("p", "p/3", false),
            ("p", "p/4", true),
        ];
        assert_eq!(overlap_with_sequential(&calls).await, 1);
    }

    #[tokio::test]
    async fn sequential_calls_of_different_callers_take_turns() {
        let calls = [("a", "a/1", true), ("b", "b/1", true)];
        assert_eq!(overlap_with_sequential(&calls).await, 1);
    }

    #[tokio::test]
    async fn ordinary_siblings_run_together() {
        let queue = NestedQueue::default();
        let cancel = CancellationToken::new();
        let first = queue.admit("p", "p/1", false, &cancel).await;
        let second = queue.admit("p", "p/2", false, &cancel).await;
        assert!(first.is_some() && second.is_some());
    }

    #[tokio::test]
    async fn calls_below_a_sequential_call_do_not_wait_for_it() {
        let queue = NestedQueue::default();
        let cancel = CancellationToken::new();
        let outer = queue.admit("m", "m/1", true, &cancel).await.unwrap();
        // Its own nested call of a sequential tool is let in at once.
        let inner = queue.admit("m/1", "m/1/1", true, &cancel).await;
        assert!(inner.is_some());
        drop(inner);
        drop(outer);
        assert!(lock(&queue.siblings).is_empty());
        assert!(lock(&queue.holders).is_empty());
    }

    #[tokio::test]
    async fn a_cancelled_waiter_gives_up() {
        let queue = NestedQueue::default();
        let cancel = CancellationToken::new();
        let _held = queue.admit("a", "a/1", true, &cancel).await.unwrap();
        let waiting = CancellationToken::new();
        waiting.cancel();
        assert!(queue.admit("b", "b/1", true, &waiting).await.is_none());
    }
}
