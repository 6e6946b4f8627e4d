//! One PostgreSQL connection on a thread of its own.
//!
//! The `postgres` crate is a blocking front for `tokio-postgres`: each client drives its own
//! Tokio runtime and panics when called (or dropped) on a thread that is already inside one.
//! Pi's engine is async, so the client lives on a dedicated thread and callers hand it whole
//! units of work (a closure: one transaction, say) and wait for the answer. Work on one
//! connection runs one unit at a time, in order.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::{Client, Config, GenericClient, Statement};

use super::tls::MakeRustlsConnect;
use super::url::flatten;
use crate::error::BoxError;

/// What a unit of work returns.
pub(crate) type Work<T> = Result<T, BoxError>;

/// Statements prepared on a connection, by SQL text.
pub(crate) type Statements = HashMap<&'static str, Statement>;

/// A unit of work; it returns whether it failed.
type Job = Box<dyn FnOnce(&mut Session) -> bool + Send>;

/// The client and its prepared statements, as a unit of work sees them.
pub(crate) struct Session {
    pub client: Client,
    statements: Statements,
}

/// Prepares on a transaction (statements outlive it: they belong to the connection).
pub(crate) fn prepare(
    statements: &mut Statements,
    client: &mut impl GenericClient,
    sql: &'static str,
) -> Work<Statement> {
    if let Some(s) = statements.get(sql) {
        return Ok(s.clone());
    }
    let s = client.prepare(sql).map_err(pg)?;
    statements.insert(sql, s.clone());
    Ok(s)
}

impl Session {
    /// The statement cache, split from the client so both can be borrowed at once.
    pub fn parts(&mut self) -> (&mut Client, &mut Statements) {
        (&mut self.client, &mut self.statements)
    }
}

/// A client error with its causes spelled out, boxed.
pub(crate) fn pg(e: postgres::Error) -> BoxError {
    flatten(&e).into()
}

/// A connection on its own thread. Dropping it closes the connection and waits for the thread.
#[derive(Debug)]
pub(crate) struct PgConn {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl PgConn {
    /// Connects, then runs `setup` (session settings) before any work. With `reconnect`, a
    /// connection found closed (server restart, network cut) is opened again after the unit of
    /// work that met it; writers pass false, since their session lock died with the connection.
    pub fn connect(
        config: &Config,
        tls: &MakeRustlsConnect,
        setup: &str,
        reconnect: bool,
    ) -> Work<PgConn> {
        let (ready_tx, ready_rx) = mpsc::channel::<Work<()>>();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let config = config.clone();
        let tls = tls.clone();
        let setup = setup.to_string();
        let thread = std::thread::Builder::new()
            .name("pi-postgres".into())
            .spawn(move || {
                let open = || {
                    config
                        .connect(tls.clone())
                        .and_then(|mut c| c.batch_execute(&setup).map(|()| c))
                        .map(|client| Session {
                            client,
                            statements: HashMap::new(),
                        })
                };
                let mut session = match open() {
                    Ok(session) => session,
                    Err(e) => {
                        let _ = ready_tx.send(Err(pg(e)));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                for job in jobs_rx {
                    let failed = job(&mut session);
                    // A lost connection is met (and reported) by a unit of work; after a failure
                    // a round trip tells whether the connection is still there, and the next
                    // unit of work gets a fresh one if not. While the server stays away, work
                    // fails on the old client and says why.
                    if reconnect
                        && failed
                        && session.client.is_valid(Duration::from_secs(10)).is_err()
                    {
                        if let Ok(fresh) = open() {
                            session = fresh;
                        }
                    }
                }
            })?;
        let conn = PgConn {
            jobs: Some(jobs_tx),
            thread: Some(thread),
        };
        ready_rx
            .recv()
            .map_err(|_| BoxError::from("the connection thread ended while connecting"))??;
        Ok(conn)
    }

    /// Runs a unit of work on the connection and waits for its result.
    pub fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Session) -> Work<T> + Send + 'static,
    ) -> Work<T> {
        let (reply_tx, reply_rx) = mpsc::channel();
        let job: Job = Box::new(move |session| {
            // The client's errors say only "db error" until their causes are spelled out.
            let result = work(session).map_err(|e| flatten(&*e).into());
            let failed = result.is_err();
            let _ = reply_tx.send(result);
            failed
        });
        let gone = || BoxError::from("the PostgreSQL connection thread has ended");
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        reply_rx.recv().map_err(|_| gone())?
    }
}

impl Drop for PgConn {
    fn drop(&mut self) {
        // Closing the queue ends the thread's loop; the client is dropped (and the connection
        // closed) there, on the thread that owns its runtime.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
