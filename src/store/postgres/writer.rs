//! Group commit for message inserts, as the SQLite writer does: one task
//! takes every insert that is waiting (up to [`MAX_BATCH`]), runs them in
//! one transaction under the write lock, notifies the other relays once,
//! commits once, and only then answers each caller. The write lock is held
//! for a batch, not for each message, so one durable commit carries many
//! messages.
//!
//! A batch costs round trips, not one a statement: the messages' rules run
//! side by side, so their checks pipeline on the one connection; ids are
//! handed out from the sequence's value read with the lock; every write
//! waits in the [`Batch`] to go with the others, and the rules write the
//! batch's message rows in one statement and each channel's count once. A
//! batch of channel posts is two round trips whatever its size: `BEGIN`
//! with the lock and the sequence, then the writes with `COMMIT`; each
//! kind of check (a recipient, a thread, a reply's target) and a new
//! thread's row add one.

use super::Sql;
use super::{Db, WRITE_LOCK, listen};
use crate::model::{Message, MessageId};
use crate::store::{NewMessage, StoreError, StoreResult, StoreStats, rules};
use bytes::{Bytes, BytesMut};
use deadpool_postgres::{ClientWrapper, Pool};
use futures::future::{join, join_all, maybe_done, poll_fn};
use std::future::Future;
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicI64, Ordering},
};
use std::task::Poll;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::{Row, SimpleQueryMessage, Statement};

/// The most inserts committed together.
const MAX_BATCH: usize = 256;

pub(super) type Job = (NewMessage, oneshot::Sender<StoreResult<Message>>);

/// Runs until every sender of `jobs` is dropped.
pub(super) async fn run(
    pool: Pool,
    own: listen::Own,
    mut jobs: mpsc::Receiver<Job>,
    stats: Arc<StoreStats>,
) {
    while let Some(first) = jobs.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let (messages, replies): (Vec<NewMessage>, Vec<_>) = batch.into_iter().unzip();
        let (writes, started) = (messages.len(), std::time::Instant::now());
        let committed = commit(&pool, &own, messages).await;
        stats.committed(writes, started.elapsed(), committed.is_ok());
        match committed {
            Ok(outcomes) => {
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
            }
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "a group commit failed"
                );
                let error = Arc::new(error);
                for reply in replies {
                    let _ = reply.send(Err(StoreError::shared(
                        &error,
                        "the write was not committed",
                    )));
                }
            }
        }
    }
}

/// One batch in one transaction: each message's outcome, or the error that
/// stopped the whole batch (then nothing of it is kept or acknowledged).
async fn commit(
    pool: &Pool,
    own: &listen::Own,
    messages: Vec<NewMessage>,
) -> StoreResult<Vec<StoreResult<Message>>> {
    let held = Held(Some(pool.get().await?));
    let batch = Batch::begin(held.client()).await?;
    let mut outcomes = rules::insert_all(&Sql(&batch), messages).await?;
    // A refusal (NotFound) wrote nothing; a database error aborted the
    // transaction, and with it every message of the batch.
    if let Some(at) = outcomes.iter().position(|outcome| {
        matches!(
            outcome,
            Err(StoreError::Backend { .. } | StoreError::Unavailable { .. })
        )
    }) {
        return Err(outcomes.swap_remove(at).expect_err("found as an error"));
    }
    let stored: Vec<MessageId> = outcomes
        .iter()
        .filter_map(|outcome| outcome.as_ref().ok().map(|m| m.id))
        .collect();
    if !stored.is_empty() {
        // Delivered to every listening relay as this commits, naming the
        // ids the batch was given (listen.rs).
        batch
            .write(
                "SELECT pg_notify($1, $2)",
                &[&listen::CHANNEL, &batch.given().payload()],
            )
            .await?;
    }
    // Before the commit, this process's own are marked as its own.
    own.lock().expect("own ids lock").extend(&stored);
    batch.commit().await?;
    held.committed();
    Ok(outcomes)
}

/// A pooled connection inside a batch's transaction: given back to the
/// pool once the batch committed, and otherwise (an error, or the batch
/// dropped half done) closed, which ends its transaction, so that no one
/// else is handed a connection inside it.
struct Held(Option<deadpool_postgres::Client>);

impl Held {
    fn client(&self) -> &ClientWrapper {
        self.0.as_ref().expect("held until committed or dropped")
    }

    fn committed(mut self) {
        drop(self.0.take());
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Client::take(client));
        }
    }
}

/// A group commit's transaction as the rules see it. Reads (and `exec`,
/// whose count is read) go to the database at once, ahead of the writes
/// waiting; ids are handed out from the sequence's value read under the
/// lock; writes are encoded as they come and wait for [`Batch::commit`].
/// Holding them loses nothing: an insert reads only what was committed
/// before its batch (a live person, a live thread or reply target, known
/// to its sender from an earlier acknowledgement), never another insert's
/// rows.
struct Batch<'c> {
    client: &'c ClientWrapper,
    /// The id the next message gets.
    next_id: AtomicI64,
    /// The first id this batch may give.
    first_id: i64,
    writes: Mutex<Vec<Write>>,
}

/// A write waiting in its batch: the prepared statement and its parameters
/// as they go on the wire.
struct Write {
    statement: Statement,
    params: Vec<Encoded>,
}

impl Write {
    async fn new(
        client: &ClientWrapper,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<Write> {
        let statement = client.prepare_cached(sql).await?;
        // Checked here, not as it is sent: the commit goes in the same
        // pipeline, and a write the driver refused before sending it
        // would not have stopped it.
        if params.len() != statement.params().len() {
            return Err(StoreError::backend(
                "queueing a write",
                format!(
                    "{} parameters for a statement of {}",
                    params.len(),
                    statement.params().len()
                ),
            ));
        }
        let params = params
            .iter()
            .zip(statement.params())
            .map(|(param, ty)| Encoded::new(*param, ty))
            .collect::<StoreResult<_>>()?;
        Ok(Write { statement, params })
    }
}

impl<'c> Batch<'c> {
    /// Opens the transaction, takes the write lock and reads the sequence
    /// under it, in one round trip: a simple query runs its statements in
    /// order, and those after a `BEGIN` in its transaction, which stays
    /// open after it.
    async fn begin(client: &'c ClientWrapper) -> StoreResult<Self> {
        let replies = client
            .simple_query(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK}); \
                 SELECT last_value, is_called FROM message_ids"
            ))
            .await?;
        let sequence = replies
            .iter()
            .rev()
            .find_map(|reply| match reply {
                SimpleQueryMessage::Row(row) => Some(row),
                _ => None,
            })
            .ok_or_else(|| StoreError::backend("reading the message ids", "no row"))?;
        let last: i64 = sequence
            .get(0)
            .and_then(|last| last.parse().ok())
            .ok_or_else(|| StoreError::backend("reading the message ids", "no last value"))?;
        // A sequence never used holds its first value, not yet given.
        let next = match sequence.get(1) {
            Some("t") => last + 1,
            _ => last,
        };
        Ok(Batch {
            client,
            next_id: AtomicI64::new(next),
            first_id: next,
            writes: Mutex::new(Vec::new()),
        })
    }

    /// Sends the sequence moved past the ids given, then every waiting
    /// write in the order they came, then `COMMIT`, all in one pipeline:
    /// one round trip. The sequence goes first: it is never rolled back, so
    /// even a batch that fails gives its ids to nobody else, as `nextval`
    /// would. A write that fails aborts the transaction, and the `COMMIT`
    /// after it then rolls it back: the batch is kept whole or not at all.
    async fn commit(self) -> StoreResult<()> {
        let next = self.next_id.load(Ordering::Relaxed);
        let mut writes = Vec::new();
        if next > self.first_id {
            let setval = "SELECT setval('message_ids', $1)";
            writes.push(Write::new(self.client, setval, &[&(next - 1)]).await?);
        }
        writes.append(&mut self.writes.lock().expect("writes lock"));
        let client = self.client;
        let mut sent: Vec<_> = writes
            .iter()
            .map(|write| {
                let params: Vec<&(dyn ToSql + Sync)> = write
                    .params
                    .iter()
                    .map(|param| param as &(dyn ToSql + Sync))
                    .collect();
                Box::pin(maybe_done(async move {
                    client.execute(&write.statement, &params).await
                }))
            })
            .collect();
        // A request goes out as its future is first polled: every write is
        // polled once, in order, before the `COMMIT` exists. One already
        // done has failed before it was sent (a value too long to bind);
        // then no `COMMIT` goes out at all, and the connection is closed.
        poll_fn(|cx| {
            for write in &mut sent {
                let _ = write.as_mut().poll(cx);
            }
            Poll::Ready(())
        })
        .await;
        if let Some(early) = sent
            .iter_mut()
            .find_map(|write| write.as_mut().take_output())
        {
            early?;
            return Err(StoreError::backend(
                "sending a write",
                "it was answered before the batch's COMMIT was sent",
            ));
        }
        let (_, committed) = join(join_all(sent.iter_mut()), client.batch_execute("COMMIT")).await;
        for write in &mut sent {
            write.as_mut().take_output().expect("awaited")?;
        }
        Ok(committed?)
    }
}

impl Batch<'_> {
    /// The ids this batch has given so far, first to last.
    fn given(&self) -> listen::Given {
        listen::Given {
            first: MessageId(self.first_id),
            last: MessageId(self.next_id.load(Ordering::Relaxed) - 1),
        }
    }
}

impl Db for Batch<'_> {
    async fn rows(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Vec<Row>> {
        self.client.rows(sql, params).await
    }

    async fn exec(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<u64> {
        self.client.exec(sql, params).await
    }

    async fn write(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<()> {
        let write = Write::new(self.client, sql, params).await?;
        self.writes.lock().expect("writes lock").push(write);
        Ok(())
    }

    async fn next_message_id(&self) -> StoreResult<MessageId> {
        Ok(MessageId(self.next_id.fetch_add(1, Ordering::Relaxed)))
    }
}

/// A parameter already encoded for its statement's type.
#[derive(Debug)]
struct Encoded(Option<Bytes>);

impl Encoded {
    fn new(param: &(dyn ToSql + Sync), ty: &Type) -> StoreResult<Self> {
        let mut out = BytesMut::new();
        let encoded = param
            .to_sql_checked(ty, &mut out)
            .map_err(|error| StoreError::backend("encoding a parameter", error))?;
        Ok(Encoded(match encoded {
            IsNull::Yes => None,
            IsNull::No => Some(out.freeze()),
        }))
    }
}

impl ToSql for Encoded {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(match &self.0 {
            Some(bytes) => {
                out.extend_from_slice(bytes);
                IsNull::No
            }
            None => IsNull::Yes,
        })
    }

    /// Checked as it was encoded, for the type it was encoded for.
    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}
