//! What a store refuses, and how it fails. A refusal names what was
//! missing or in the way, as a type; its words for a person are written
//! here once, whatever backend refused.

use crate::model::{Handle, MessageId, ThreadId};
use std::{fmt, future::Future, path::PathBuf, pin::Pin, sync::Arc};

pub type StoreResult<T> = Result<T, StoreError>;
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'a>>;

/// Any backend's own error, kept as the source of a [`StoreError`].
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The thing named does not exist (or is not live any more).
    #[error("{0}")]
    NotFound(Missing),
    /// The write would break a uniqueness rule, or something is in the way.
    #[error("{0}")]
    Conflict(Clash),
    /// The database failed: what was being done, and the database's own
    /// error as the source. For the log, never for a client.
    #[error("{doing}")]
    Backend {
        doing: String,
        #[source]
        source: BackendError,
    },
    /// The database cannot be reached just now (a PostgreSQL server
    /// restarting, a lost connection): nothing was done, and trying again
    /// shortly may succeed.
    #[error("{doing}: the database cannot be reached")]
    Unavailable {
        doing: String,
        #[source]
        source: BackendError,
    },
}

/// What a refused operation named that is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// A message's recipient: nobody live holds the handle.
    Recipient(Handle),
    /// A thread with no live message.
    Thread(ThreadId),
    /// What a reply names is not a live message of the reply's conversation.
    ReplyTarget(MessageId),
    /// A live person to rotate or revoke.
    ActivePerson(Handle),
    /// The database file a command reads.
    Database(PathBuf),
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Recipient(handle) => {
                write!(f, "there is nobody called {handle} on this relay")
            }
            Missing::Thread(id) => write!(f, "there is no thread {id}"),
            Missing::ReplyTarget(id) => {
                write!(
                    f,
                    "reply_to {id} is not a live message of this conversation"
                )
            }
            Missing::ActivePerson(handle) => write!(f, "there is no active person {handle}"),
            Missing::Database(path) => write!(f, "there is no database at {}", path.display()),
        }
    }
}

/// What stands in the way of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clash {
    /// The handle was taken, perhaps by someone since revoked.
    HandleTaken(Handle),
    /// A relay is serving the database, holding `lock`.
    Serving { db: PathBuf, lock: PathBuf },
    /// A copy would overwrite what is at this path.
    Exists(PathBuf),
    /// A file to restore from is not a crosstalk database one can trust.
    NotSound { path: PathBuf, checked: String },
    /// A migration's target already holds a relay's people or messages.
    TargetInUse,
}

impl fmt::Display for Clash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Clash::HandleTaken(handle) => write!(
                f,
                "{handle} is already taken (revoked handles stay taken, so old messages keep \
                 their author)"
            ),
            Clash::Serving { db, lock } => write!(
                f,
                "a relay is serving {} (it holds {}): stop it first, for example with \
                 `systemctl stop crosstalk`",
                db.display(),
                lock.display()
            ),
            Clash::Exists(path) => write!(
                f,
                "{} exists already (a file or a link): give a new path, so nothing is overwritten",
                path.display()
            ),
            Clash::NotSound { path, checked } => write!(
                f,
                "{} is not a sound crosstalk database ({checked})",
                path.display()
            ),
            Clash::TargetInUse => f.write_str(
                "the PostgreSQL database already holds a relay's people or messages; \
                 migrate into an empty one",
            ),
        }
    }
}

impl StoreError {
    /// A database whose schema is at `version`, newer than the `known` steps
    /// of this build: it is refused, never changed.
    pub(crate) fn schema_too_new(version: usize, known: usize) -> StoreError {
        StoreError::backend(
            "cannot use the database",
            format!(
                "it has schema version {version}, newer than this crosstalk knows ({known}); \
                 run a newer crosstalk"
            ),
        )
    }

    /// A failure of the database while `doing` something.
    pub fn backend(doing: impl Into<String>, source: impl Into<BackendError>) -> StoreError {
        StoreError::Backend {
            doing: doing.into(),
            source: source.into(),
        }
    }

    /// The failure of an attempt several callers shared, as each of them
    /// gets it: what it was doing, the database away if it was, and the
    /// shared failure as its source.
    pub(crate) fn shared(failure: &Arc<StoreError>, doing: &str) -> StoreError {
        let doing = doing.to_owned();
        let source = Box::new(failure.clone());
        match **failure {
            StoreError::Unavailable { .. } => StoreError::Unavailable { doing, source },
            _ => StoreError::Backend { doing, source },
        }
    }
}
