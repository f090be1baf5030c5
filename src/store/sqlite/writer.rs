//! The writer thread and its group commit.
//!
//! Writes are closures sent to one thread. It takes every write that is
//! waiting (up to [`MAX_BATCH`]), runs each inside its own savepoint of one
//! transaction, commits once, and only then answers each caller. So many
//! concurrent writers share one commit, a failed write undoes only itself,
//! and no caller hears of a write that might still be lost.

use crate::store::{StoreError, StoreResult, StoreStats};
use rusqlite::Connection;
use std::sync::{Arc, mpsc};
use tokio::sync::oneshot;

/// The most writes committed together; bounds the latency a batch adds.
const MAX_BATCH: usize = 512;

/// A write: runs on the writer's connection, says whether it succeeded (so
/// the writer can undo it alone), and leaves what to do after the commit.
pub(super) type Job = Box<dyn FnOnce(&Connection) -> (bool, Finish) + Send>;
/// What a job leaves to do once its batch has committed (or failed to).
type Finish = Box<dyn FnOnce(Result<(), Arc<rusqlite::Error>>) + Send>;

/// Wraps `work` as a job, and returns the receiver of its outcome, which
/// arrives after the batch commits.
pub(super) fn job<T, F>(work: F) -> (Job, oneshot::Receiver<StoreResult<T>>)
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    let job: Job = Box::new(move |conn| {
        let outcome = work(conn);
        let succeeded = outcome.is_ok();
        let finish: Finish = Box::new(move |committed| {
            let outcome = match (outcome, committed) {
                (Ok(value), Ok(())) => Ok(value),
                (Err(error), _) => Err(error),
                (Ok(_), Err(error)) => Err(StoreError::backend("committing a write", error)),
            };
            let _ = reply.send(outcome);
        });
        (succeeded, finish)
    });
    (job, answer)
}

/// The writer thread: batch, commit once, then answer everyone in the batch.
/// Ends when every sender of `queue` is dropped.
pub(super) fn run(conn: Connection, queue: mpsc::Receiver<Job>, stats: &StoreStats) {
    while let Ok(first) = queue.recv() {
        let started = std::time::Instant::now();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
            tracing::error!(%error, "cannot begin a write transaction");
            // Dropping the jobs unrun answers each caller with an error.
            continue;
        }
        let mut finishes = Vec::with_capacity(batch.len());
        for job in batch {
            // Each job in its own savepoint, so a failing one undoes only
            // itself (statements cached: they run twice for every write).
            if let Err(error) = run_cached(&conn, "SAVEPOINT job") {
                tracing::error!(%error, "cannot open a write's savepoint");
                continue; // dropped unrun: its caller gets an error
            }
            let (succeeded, finish) = job(&conn);
            let closed = if succeeded {
                run_cached(&conn, "RELEASE job")
            } else {
                run_cached(&conn, "ROLLBACK TO job").and_then(|()| run_cached(&conn, "RELEASE job"))
            };
            if let Err(error) = closed {
                tracing::error!(%error, "cannot close a write's savepoint");
            }
            finishes.push(finish);
        }
        let committed = conn.execute_batch("COMMIT").map_err(Arc::new);
        if let Err(error) = &committed {
            tracing::error!(%error, "a group commit failed");
            let _ = conn.execute_batch("ROLLBACK");
        }
        stats.committed(finishes.len(), started.elapsed(), committed.is_ok());
        for finish in finishes {
            finish(committed.clone());
        }
    }
}

fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}
