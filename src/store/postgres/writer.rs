//! Group commit for message inserts, as the SQLite writer does: one task
//! takes every insert that is waiting (up to [`MAX_BATCH`]), runs them in
//! one transaction under the write lock — their statements pipelined on
//! one connection — notifies the other relays once, commits once, and only
//! then answers each caller. The write lock is held for a batch, not for
//! each message, so one durable commit carries many messages.

use super::statements::Sql;
use super::{Db, WRITE_LOCK, listen};
use crate::model::{Message, MessageId};
use crate::store::{NewMessage, StoreError, StoreResult, rules};
use deadpool_postgres::Pool;
use futures::future::join_all;
use tokio::sync::{mpsc, oneshot};

/// The most inserts committed together.
const MAX_BATCH: usize = 256;

pub(super) type Job = (NewMessage, oneshot::Sender<StoreResult<Message>>);

/// Runs until every sender of `jobs` is dropped.
pub(super) async fn run(pool: Pool, own: listen::Own, mut jobs: mpsc::Receiver<Job>) {
    while let Some(first) = jobs.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let (messages, replies): (Vec<NewMessage>, Vec<_>) = batch.into_iter().unzip();
        match commit(&pool, &own, messages).await {
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
                let away = matches!(error, StoreError::Unavailable { .. });
                for reply in replies {
                    let doing = "the write was not committed".to_owned();
                    let source = error.to_string().into();
                    let _ = reply.send(Err(match away {
                        true => StoreError::Unavailable { doing, source },
                        false => StoreError::Backend { doing, source },
                    }));
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
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.exec("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
        .await?;
    let on = Sql(&tx);
    let mut outcomes = join_all(
        messages
            .into_iter()
            .map(|message| rules::insert(&on, message)),
    )
    .await;
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
        // Delivered to every listening relay as this commits (listen.rs);
        // before the commit, this process's own are marked as its own.
        tx.exec("SELECT pg_notify($1, '')", &[&listen::CHANNEL])
            .await?;
        own.lock().expect("own ids lock").extend(&stored);
    }
    tx.commit().await?;
    Ok(outcomes)
}
