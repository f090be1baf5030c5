//! The reader threads: at most [`most`] of them, the first started with
//! the store and the others as reads need them, each with a connection of
//! its own kept open, taking reads from one queue in the order they came.
//! A read whose caller has gone by the time a thread takes it is skipped.
//!
//! Threads of the store's own rather than tokio's blocking pool: the pool
//! starts a thread for a task whenever none is idle at that moment, and a
//! thread that has just answered a read is not idle yet, so 16 connections
//! reading pages kept about 18 threads for 4 reads at once, each with a
//! heap of the allocator's (bench/README.md). Here the threads are never
//! more than the reads that may run at once.

use super::schema;
use crate::store::{StoreError, StoreResult};
use rusqlite::Connection;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
    mpsc,
};
use tokio::sync::oneshot;

/// The most reads that run at once, each on a thread and a connection of
/// its own: one a core, and at least two, so that a read waiting on the
/// disk leaves another running. Reads are CPU work (a page SQLite does not
/// cache is a copy from the kernel's), so more at once read no faster: on
/// two cores, four read no faster and left 10 MB more resident after
/// `bench/outside.py`'s load, each thread's heap of the allocator keeping
/// what it freed (bench/README.md). Reads past it wait in the queue. The
/// connections stay open, idle or not: as many as this, each with its own
/// cache (`schema::open_connection`).
pub(super) fn most() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.max(2)
}

/// A read as a thread runs it: given its thread's connection, or the error
/// that opening one gave.
type Job = Box<dyn FnOnce(StoreResult<&Connection>) + Send>;

/// The queue of reads and the threads that take them; the threads end
/// when this is dropped.
pub(super) struct Readers {
    queue: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

/// What the threads share with the queue's sender.
struct Shared {
    path: PathBuf,
    /// [`most`], read once: it reads the system's limits each time.
    most: usize,
    jobs: Mutex<mpsc::Receiver<Job>>,
    /// Reads queued and not yet taken by a thread.
    waiting: AtomicUsize,
    /// Threads waiting for a read.
    idle: AtomicUsize,
    /// Threads started, never more than [`most`].
    started: AtomicUsize,
}

impl Readers {
    /// Starts the first thread, so that a read always has one to take it
    /// even when no more can be started.
    pub(super) fn start(path: &Path) -> StoreResult<Readers> {
        let (queue, jobs) = mpsc::channel();
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            most: most(),
            jobs: Mutex::new(jobs),
            waiting: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            started: AtomicUsize::new(1),
        });
        shared
            .spawn()
            .map_err(|e| StoreError::backend("cannot start a database reader thread", e))?;
        Ok(Readers { queue, shared })
    }

    /// Queues `work`; its outcome arrives on the receiver, which is dropped
    /// unanswered only if `work` panicked.
    pub(super) fn run<T, F>(&self, work: F) -> oneshot::Receiver<StoreResult<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            if !reply.is_closed() {
                let _ = reply.send(conn.and_then(work));
            }
        });
        self.shared.waiting.fetch_add(1, Ordering::SeqCst);
        // Never refused: the receiver lives in `shared`, as long as this.
        let _ = self.queue.send(job);
        self.start_if_needed();
        answer
    }

    /// Starts one more thread when more reads wait than threads do, up to
    /// [`most`]. A race may start one that finds nothing to do, never one
    /// past the bound.
    fn start_if_needed(&self) {
        let shared = &self.shared;
        if shared.waiting.load(Ordering::SeqCst) <= shared.idle.load(Ordering::SeqCst) {
            return;
        }
        let more = |started: usize| (started < shared.most).then_some(started + 1);
        if shared
            .started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, more)
            .is_err()
        {
            return;
        }
        if let Err(error) = shared.spawn() {
            // The reads wait for the threads already running, at least the
            // first; the next read tries again.
            shared.started.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot start a database reader thread"
            );
        }
    }

    /// The threads started so far.
    #[cfg(test)]
    pub(super) fn started(&self) -> usize {
        self.shared.started.load(Ordering::SeqCst)
    }
}

impl Shared {
    fn spawn(self: &Arc<Self>) -> std::io::Result<()> {
        let thread = self.clone();
        std::thread::Builder::new()
            .name("crosstalk-read".into())
            .spawn(move || thread.serve())
            .map(drop)
    }

    /// A thread's loop: takes reads until the queue's sender is dropped.
    /// Its connection opens at its first read, and again at the next after
    /// opening failed or a read panicked. A read that panics is answered
    /// with an error (its reply dropped), and the thread goes on: threads
    /// that ended would leave reads waiting for none.
    fn serve(&self) {
        let mut conn = None;
        loop {
            self.idle.fetch_add(1, Ordering::SeqCst);
            let job = self.jobs.lock().expect("read queue lock").recv();
            self.idle.fetch_sub(1, Ordering::SeqCst);
            let Ok(job) = job else { return };
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            let kept_or_opened = conn
                .take()
                .map_or_else(|| schema::open_connection(&self.path), Ok);
            let open = match kept_or_opened {
                Ok(open) => open,
                Err(error) => {
                    job(Err(error));
                    continue;
                }
            };
            // Kept unless the read panicked: it may have stopped in the
            // middle of a statement.
            if std::panic::catch_unwind(AssertUnwindSafe(|| job(Ok(&open)))).is_ok() {
                conn = Some(open);
            }
        }
    }
}
