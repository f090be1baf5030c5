//! JSON-RPC 2.0 as the A2A edge speaks it: errors with A2A's reasons, and
//! what a call comes to.

use crate::relay::RelayError;
use crate::wire::ApiError;
use axum::response::Response;
use serde_json::{Value, json};

/// An A2A or JSON-RPC error: its code, and what to change.
pub(super) struct RpcError {
    code: i64,
    message: String,
    /// A2A's name of it (`google.rpc.ErrorInfo`'s `reason`), for its own
    /// codes.
    reason: Option<&'static str>,
}

impl RpcError {
    pub(super) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            reason: None,
        }
    }

    pub(super) fn a2a(code: i64, reason: &'static str, message: impl Into<String>) -> RpcError {
        RpcError {
            reason: Some(reason),
            ..RpcError::new(code, message)
        }
    }

    pub(super) fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(-32602, message)
    }

    pub(super) fn task_not_found(id: &str) -> RpcError {
        RpcError::a2a(
            -32001,
            "TASK_NOT_FOUND",
            format!("there is no task {id} of yours"),
        )
    }

    pub(super) fn body(self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(reason) = self.reason {
            error["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
            }]);
        }
        error
    }
}

/// What a call comes to: a JSON-RPC result or error, or a refusal the
/// relay gives every client alike (a quota's 429, an outage's 503), as
/// HTTP.
pub(super) enum Outcome {
    Result(Value),
    Error(RpcError),
    Http(ApiError),
    /// A streaming call's events.
    Stream(Box<Response>),
}

impl From<RpcError> for Outcome {
    fn from(error: RpcError) -> Outcome {
        Outcome::Error(error)
    }
}

/// The relay's refusal of a call: bad input is the caller's to change
/// (invalid params); what every client is told the same way (quotas, waits,
/// outages, the relay's own failures) stays HTTP.
impl From<RelayError> for Outcome {
    fn from(error: RelayError) -> Outcome {
        match error {
            RelayError::BadInput(_)
            | RelayError::NotFound(_)
            | RelayError::Forbidden(_)
            | RelayError::Conflict(_)
            | RelayError::TooLarge { .. } => RpcError::invalid_params(error.to_string()).into(),
            other => Outcome::Http(ApiError::from(other)),
        }
    }
}
