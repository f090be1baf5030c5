//! How the core says no: one [`RelayError`] that every edge maps the same way.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The caller sent something malformed; the text says what to change.
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// The caller has as many waits and streams open as one may.
    #[error("{0}")]
    TooManyWaits(String),
    /// A quota ran out; it has room again after `retry_after`.
    #[error("{message}")]
    Quota {
        message: String,
        retry_after: std::time::Duration,
    },
    /// The relay has as many waits and streams open as it takes.
    #[error("{0}")]
    Overloaded(String),
    #[error("the body is {size} bytes; this relay accepts at most {max}")]
    TooLarge { size: usize, max: usize },
    #[error(
        "refused: the message looks like it contains {0}. Nothing was stored. \
         Remove the secret and send again; share secrets through your team's secret store"
    )]
    SecretRefused(&'static str),
    /// A failure of the relay itself: logged with its source, never sent.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The database cannot be reached just now: logged with its source;
    /// the caller is told to try again shortly.
    #[error("the relay cannot reach its database just now; try again shortly")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl From<StoreError> for RelayError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(what) => RelayError::NotFound(what.to_string()),
            StoreError::Conflict(what) => RelayError::Conflict(what.to_string()),
            backend @ StoreError::Backend { .. } => RelayError::Internal(Box::new(backend)),
            away @ StoreError::Unavailable { .. } => RelayError::Unavailable(Box::new(away)),
        }
    }
}

impl RelayError {
    /// A short name of the kind of refusal, for the metrics: never what
    /// the caller sent.
    pub fn reason(&self) -> &'static str {
        match self {
            RelayError::BadInput(_) => "bad_input",
            RelayError::Unauthorized(_) => "unauthorized",
            RelayError::Forbidden(_) => "forbidden",
            RelayError::NotFound(_) => "not_found",
            RelayError::Conflict(_) => "conflict",
            RelayError::TooManyWaits(_) => "too_many_waits",
            RelayError::Quota { .. } => "quota",
            RelayError::Overloaded(_) => "overloaded",
            RelayError::TooLarge { .. } => "too_large",
            RelayError::SecretRefused(_) => "secret",
            RelayError::Internal(_) => "internal",
            RelayError::Unavailable(_) => "unavailable",
        }
    }

    /// A malformed `field`, with the parser's own reason.
    pub(crate) fn bad_field(field: &str, reason: impl std::fmt::Display) -> RelayError {
        RelayError::BadInput(format!("{field}: {reason}"))
    }
}

pub type RelayResult<T> = Result<T, RelayError>;
