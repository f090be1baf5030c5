//! Wake-ups across instances: every group of inserts notifies
//! [`CHANNEL`] as it commits, naming the ids it was given ([`Given`]), and
//! each instance keeps one connection listening. On a notification it
//! reads every message above the last id it has seen, in id order, and
//! hands on those another process committed. Ids are handed out in commit
//! order (the write lock), and PostgreSQL delivers notifications in commit
//! order, so reading "above the last seen" never skips one that commits
//! late. A notification of this process's own batch that follows on from
//! the last seen id is passed without a read: only this batch could use
//! its ids, and its wake-ups were given at commit. After the connection
//! drops, it connects again (backing off) and reads above the last seen id
//! the same way: a notification lost meanwhile loses no wake-up.

use crate::model::{Message, MessageId, now_millis};
use crate::store::columns::{INBOX_JOIN, MESSAGE_COLUMNS};
use crate::store::statements::messages::message_from_row;
use crate::store::{StoreResult, StoreStats};
use futures::StreamExt;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Client, Socket, Statement};

/// The notification channel of message commits.
pub(super) const CHANNEL: &str = "crosstalk_messages";

/// How many messages one read after a notification takes at most.
const READ_BATCH: i64 = 500;

/// The wait before connecting again, doubled at each failure up to 5 s,
/// and back to this once a connection listens.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Ids this process inserted and the listener has not yet passed: it skips
/// them (their wake-ups were given at commit), and forgets any it has
/// passed (a rolled-back insert's id never commits).
pub(super) type Own = Arc<Mutex<BTreeSet<MessageId>>>;

/// Listens until `commits` is dropped, handing on other processes'
/// messages committed after `from`.
pub(super) async fn run<T>(
    config: tokio_postgres::Config,
    tls: T,
    last_seen: MessageId,
    own: Own,
    commits: mpsc::Sender<Message>,
    stats: Arc<StoreStats>,
) where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + 'static,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let mut progress = Progress {
        last_seen,
        backoff: FIRST_BACKOFF,
        listened: false,
    };
    loop {
        match listen(&config, tls.clone(), &mut progress, &own, &commits, &stats).await {
            Ok(()) => return, // nobody takes commits any more
            Err(error) => {
                tracing::warn!(
                    %error,
                    "lost the database connection that wakes this relay for other relays' \
                     messages; connecting again"
                );
            }
        }
        if commits.is_closed() {
            return;
        }
        tokio::time::sleep(progress.backoff).await;
        progress.backoff = (progress.backoff * 2).min(Duration::from_secs(5));
    }
}

/// What the listener carries from one connection to the next.
struct Progress {
    /// The last message it handed on (or passed as this process's own).
    last_seen: MessageId,
    /// The wait before connecting again.
    backoff: Duration,
    /// Whether a connection has listened before: the next that does is a
    /// reconnect.
    listened: bool,
}

/// One connection's life: listen, catch up, then catch up again at every
/// notification. `Ok` when nobody takes commits any more; `Err` when the
/// connection failed.
async fn listen<T>(
    config: &tokio_postgres::Config,
    tls: T,
    progress: &mut Progress,
    own: &Own,
    commits: &mpsc::Sender<Message>,
    stats: &StoreStats,
) -> StoreResult<()>
where
    T: MakeTlsConnect<Socket> + Send + 'static,
    T::Stream: Send + 'static,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let (client, mut connection) = config.connect(tls).await?;
    let (notified, mut notifications) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    let _ = notified.send(Given::named_by(notification.payload()));
                }
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    });
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    let after = client
        .prepare(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
             WHERE m.id > $1 ORDER BY m.id LIMIT $2"
        ))
        .await?;
    tracing::debug!("listening for other relays' messages");
    progress.backoff = FIRST_BACKOFF;
    if std::mem::replace(&mut progress.listened, true) {
        stats.listener_reconnects.fetch_add(1, Ordering::Relaxed);
    }
    let caught_up = async {
        // What committed while nobody listened, then at each notification
        // that names no batch of this process's own following on from the
        // last seen (those that came meanwhile are covered by the same
        // read).
        loop {
            if !catch_up(
                &client,
                &after,
                &mut progress.last_seen,
                own,
                commits,
                stats,
            )
            .await?
            {
                return Ok(());
            }
            loop {
                let Some(given) = notifications.recv().await else {
                    return Err(crate::store::StoreError::backend(
                        "listening for other relays' messages",
                        "the connection closed",
                    ));
                };
                if !given.is_some_and(|given| given.passed_as_own(&mut progress.last_seen, own)) {
                    break;
                }
            }
            while notifications.try_recv().is_ok() {}
        }
    };
    let outcome = caught_up.await;
    driver.abort();
    outcome
}

/// The ids one group commit was given, first to last, as its notification
/// names them (`first last`). Some may be unused (an insert refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Given {
    pub first: MessageId,
    pub last: MessageId,
}

impl Given {
    /// The payload a commit notifies with.
    pub(super) fn payload(&self) -> String {
        format!("{} {}", self.first.0, self.last.0)
    }

    /// The batch a payload names; none for one that names none (a relay
    /// of a version before payloads, which notifies with none).
    fn named_by(payload: &str) -> Option<Given> {
        let (first, last) = payload.split_once(' ')?;
        let (first, last) = (first.parse().ok()?, last.parse().ok()?);
        (1 <= first && first <= last).then_some(Given {
            first: MessageId(first),
            last: MessageId(last),
        })
    }

    /// Passes the batch without reading it, if it is this process's own
    /// (some of its ids are) and follows on from `last_seen`: everything
    /// up to it has been handed on, and only this process used its ids.
    /// `false` when it must be read.
    fn passed_as_own(&self, last_seen: &mut MessageId, own: &Own) -> bool {
        let mut own = own.lock().expect("own ids lock");
        let follows = last_seen.0 >= self.first.0.saturating_sub(1);
        if !follows || own.range(self.first..=self.last).next().is_none() {
            return false;
        }
        *last_seen = (*last_seen).max(self.last);
        let seen = *last_seen;
        own.retain(|&id| id > seen);
        true
    }
}

/// Hands on every message above `last_seen` that this process did not
/// insert; `false` when nobody takes them any more.
async fn catch_up(
    client: &Client,
    after: &Statement,
    last_seen: &mut MessageId,
    own: &Own,
    commits: &mpsc::Sender<Message>,
    stats: &StoreStats,
) -> StoreResult<bool> {
    loop {
        let rows = client.query(after, &[&*last_seen, &READ_BATCH]).await?;
        for row in &rows {
            let message = message_from_row(&crate::store::sql::Row::Postgres(row))?;
            *last_seen = message.id;
            let mine = own.lock().expect("own ids lock").remove(&message.id);
            if mine {
                continue;
            }
            let lag = now_millis().saturating_sub(message.created_at);
            stats.listener_lag_seconds.observe(lag as f64 / 1000.0);
            if commits.send(message).await.is_err() {
                return Ok(false);
            }
        }
        // Ids at or below the last seen that were never read were rolled back.
        let seen = *last_seen;
        own.lock().expect("own ids lock").retain(|&id| id > seen);
        if (rows.len() as i64) < READ_BATCH {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(ids: &[i64]) -> Own {
        Arc::new(Mutex::new(ids.iter().map(|&id| MessageId(id)).collect()))
    }

    #[test]
    fn a_payload_names_a_batch_or_none() {
        let given = Given {
            first: MessageId(3),
            last: MessageId(5),
        };
        assert_eq!(Given::named_by(&given.payload()), Some(given));
        for payload in [
            "",
            "3",
            "5 3",
            "a b",
            "3 5 7",
            "-",
            "0 2",
            "-9223372036854775808 1",
        ] {
            assert_eq!(Given::named_by(payload), None, "{payload:?}");
        }
    }

    #[test]
    fn only_an_own_batch_that_follows_on_is_passed_unread() {
        let given = Given {
            first: MessageId(3),
            last: MessageId(5),
        };
        // Its ids are this process's (one was refused), and it follows on.
        let mine = own(&[3, 5, 9]);
        let mut last_seen = MessageId(2);
        assert!(given.passed_as_own(&mut last_seen, &mine));
        assert_eq!(last_seen, MessageId(5));
        assert_eq!(*mine.lock().unwrap(), [MessageId(9)].into());
        // Read already, up to one of its ids.
        let mut last_seen = MessageId(4);
        assert!(given.passed_as_own(&mut last_seen, &own(&[5])));
        assert_eq!(last_seen, MessageId(5));
        // Another process's batch, and one after a gap nobody read: read.
        for (seen, ids) in [(2, &[9][..]), (1, &[3, 4, 5][..])] {
            let mut last_seen = MessageId(seen);
            assert!(!given.passed_as_own(&mut last_seen, &own(ids)));
            assert_eq!(last_seen, MessageId(seen));
        }
    }
}
