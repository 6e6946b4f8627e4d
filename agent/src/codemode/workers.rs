//! Pi's codemode worker limit: at most `PI_CODEMODE_MAX_WORKERS` (default 2) scripts run at
//! once in one process, across all its sessions, because each may hold a 256 MB VM. Further
//! scripts wait in arrival order; the wait counts toward the script's own deadline and is
//! bounded (60 s) so scripts that wait on each other (a subagent's codemode inside a
//! codemode call) fail instead of deadlocking. A slot is held until the VM thread has exited,
//! so a cancelled script keeps its slot while it winds down, as in Pi.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How long a script waits for a slot at most (Pi's `CODEMODE_WORKER_WAIT_MS`).
const MAX_WAIT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_WORKERS: usize = 2;

/// A reserved slot; dropping it frees the slot for the next waiting script.
pub struct WorkerSlot {
    _permit: OwnedSemaphorePermit,
}

/// Why a script got no slot: it did not start.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The call was aborted while waiting.
    Aborted,
    /// The script's own `timeout_ms` passed while waiting.
    DeadlineWhileWaiting { timeout: Duration },
    /// No slot came free within the pool's longest wait; `max` slots exist.
    NoneFree { max: usize, waited: Duration },
}

impl Refusal {
    /// The `Script error:` text Pi gives for each case.
    pub fn message(&self) -> String {
        match self {
            Refusal::Aborted => "Script aborted: This operation was aborted".to_string(),
            Refusal::DeadlineWhileWaiting { timeout } => format!(
                "Script timed out: Execution timed out after {} ms while waiting for a free \
                 codemode worker",
                timeout.as_millis()
            ),
            Refusal::NoneFree { max, waited } => format!(
                "No codemode worker became free within {} seconds. All {max} workers, shared by \
                 every session in this process, are held by other scripts. Retry after they finish.",
                waited.as_secs()
            ),
        }
    }
}

/// A fixed number of slots handed out in arrival order (tokio's semaphore is fair).
pub struct WorkerPool {
    slots: Arc<Semaphore>,
    max: usize,
    longest_wait: Duration,
}

impl WorkerPool {
    pub fn new(max: usize, longest_wait: Duration) -> WorkerPool {
        let max = max.max(1);
        WorkerPool {
            slots: Arc::new(Semaphore::new(max)),
            max,
            longest_wait,
        }
    }

    /// The process's pool, sized by `PI_CODEMODE_MAX_WORKERS` (a positive integer) when
    /// first used. Pi reads the variable per call for SDK hosts that change it at run time;
    /// a `pi` process cannot change its own environment, so once is the same here.
    pub fn global() -> &'static WorkerPool {
        static POOL: OnceLock<WorkerPool> = OnceLock::new();
        POOL.get_or_init(|| {
            let max = std::env::var("PI_CODEMODE_MAX_WORKERS")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(DEFAULT_MAX_WORKERS);
            WorkerPool::new(max, MAX_WAIT)
        })
    }

    /// Waits for a slot, at most until `deadline` (the script's `timeout_ms`) or
    /// the pool's longest wait, whichever is sooner, or until `cancel` fires.
    pub async fn reserve(
        &self,
        deadline: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<WorkerSlot, Refusal> {
        if cancel.is_cancelled() {
            return Err(Refusal::Aborted);
        }
        let longest = self.longest_wait;
        let wait = deadline.map_or(longest, |d| d.min(longest));
        tokio::select! {
            permit = tokio::time::timeout(wait, self.slots.clone().acquire_owned()) => match permit {
                Ok(Ok(permit)) => Ok(WorkerSlot { _permit: permit }),
                // The semaphore is never closed; treat it like a full wait all the same.
                Ok(Err(_)) | Err(_) => Err(match deadline {
                    Some(timeout) if timeout <= longest => Refusal::DeadlineWhileWaiting { timeout },
                    _ => Refusal::NoneFree { max: self.max, waited: longest },
                }),
            },
            _ = cancel.cancelled() => Err(Refusal::Aborted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_go_to_waiters_in_arrival_order_and_come_back_on_drop() {
        let pool = Arc::new(WorkerPool::new(1, Duration::from_secs(60)));
        let never = CancellationToken::new();
        let first = pool.reserve(None, &never).await.unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for n in 0..3 {
            let (pool, tx, never) = (pool.clone(), tx.clone(), never.clone());
            tokio::spawn(async move {
                let slot = pool.reserve(None, &never).await.unwrap();
                tx.send(n).unwrap();
                drop(slot);
            });
            // Let each waiter queue before the next one arrives.
            tokio::task::yield_now().await;
        }
        drop(first);
        let order: Vec<i32> = vec![
            rx.recv().await.unwrap(),
            rx.recv().await.unwrap(),
            rx.recv().await.unwrap(),
        ];
        assert_eq!(order, [0, 1, 2]);
    }

    #[tokio::test]
    async fn a_full_pool_refuses_after_the_deadline_or_the_longest_wait() {
        let pool = WorkerPool::new(2, Duration::from_secs(2));
        let never = CancellationToken::new();
        let _held = (
            pool.reserve(None, &never).await.unwrap(),
            pool.reserve(None, &never).await.unwrap(),
        );
        let refusal = pool
            .reserve(Some(Duration::from_millis(250)), &never)
            .await
            .err();
        assert_eq!(
            refusal,
            Some(Refusal::DeadlineWhileWaiting {
                timeout: Duration::from_millis(250)
            })
        );
        assert!(refusal
            .unwrap()
            .message()
            .ends_with("after 250 ms while waiting for a free codemode worker"));
        // A deadline beyond the longest wait, or none: the pool's own message.
        let full = Refusal::NoneFree {
            max: 2,
            waited: Duration::from_secs(2),
        };
        let refusal = pool.reserve(Some(Duration::from_secs(600)), &never).await;
        assert_eq!(refusal.err().as_ref(), Some(&full));
        assert_eq!(pool.reserve(None, &never).await.err().as_ref(), Some(&full));
        assert!(full
            .message()
            .starts_with("No codemode worker became free within 2 seconds. All 2 workers"));
    }

    #[tokio::test]
    async fn an_abort_while_waiting_refuses_and_leaves_the_queue() {
        let pool = WorkerPool::new(1, Duration::from_secs(60));
        let never = CancellationToken::new();
        let held = pool.reserve(None, &never).await.unwrap();
        let cancel = CancellationToken::new();
        let abort = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            abort.cancel();
        });
        assert_eq!(
            pool.reserve(None, &cancel).await.err(),
            Some(Refusal::Aborted)
        );
        assert_eq!(
            pool.reserve(None, &cancel).await.err(),
            Some(Refusal::Aborted)
        );
        // The aborted waiter does not keep the slot from the next one.
        drop(held);
        assert!(pool.reserve(None, &never).await.is_ok());
    }
}
