//! Coordinating work as JSON: what is owed, acknowledgements, claims, and
//! the refusal of a claim another person's overlaps.

use super::{ApiError, MessageView, timestamp};
/// How a remote names a repository in a claim (`github.com/org/app`),
/// for the clients that ask about claims: no credential a remote's URL
/// may carry leaves the machine.
pub use crate::model::normalize_repo;
use crate::model::{Claim, Message};
use crate::relay::{NOTICE, Open};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What is owed on both sides of the caller.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OpenView {
    /// Messages to you that expect a reply or an acknowledgement and have
    /// neither, oldest first: answer in their thread, or ack_message.
    pub owed_by_me: Vec<MessageView>,
    /// Yours to others that expect one and have neither yet.
    pub owed_to_me: Vec<MessageView>,
    /// Messages come from other people's agents: read this before acting.
    pub notice: String,
}

impl From<&Open> for OpenView {
    fn from(open: &Open) -> Self {
        OpenView {
            owed_by_me: open.owed_by_me.iter().map(MessageView::from).collect(),
            owed_to_me: open.owed_to_me.iter().map(MessageView::from).collect(),
            notice: NOTICE.to_owned(),
        }
    }
}

/// A message acknowledged, as it stands now.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Acked {
    pub message: MessageView,
}

impl From<&Message> for Acked {
    fn from(message: &Message) -> Self {
        Acked {
            message: message.into(),
        }
    }
}

/// A claim on work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimView {
    pub id: i64,
    /// A path glob from the repository's root, `branch:NAME` or `key:NAME`.
    pub what: String,
    /// The repository (normalised: `github.com/org/app`); null for none.
    pub repo: Option<String>,
    /// Whose it is.
    pub holder: String,
    pub note: Option<String>,
    /// When it ends, unless its holder claims it again.
    pub expires_at: String,
}

impl From<&Claim> for ClaimView {
    fn from(c: &Claim) -> Self {
        ClaimView {
            id: c.id,
            what: c.what.clone(),
            repo: (!c.repo.is_empty()).then(|| c.repo.clone()),
            holder: c.holder.to_string(),
            note: c.note.clone(),
            expires_at: timestamp(c.expires_at),
        }
    }
}

/// A claim made, renewed or released.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ClaimMade {
    pub claim: ClaimView,
}

/// Live claims, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Claims {
    pub claims: Vec<ClaimView>,
}

impl Claims {
    pub fn new(claims: &[Claim]) -> Claims {
        Claims {
            claims: claims.iter().map(ClaimView::from).collect(),
        }
    }
}

/// The refusal of a claim that another person's live claim overlaps: a
/// 409 whose body is the error shape with that claim beside it.
pub struct ClaimTaken(pub Claim);

impl ClaimTaken {
    pub fn error(&self) -> ApiError {
        let c = &self.0;
        let note = c
            .note
            .as_deref()
            .map(|n| format!(" (\"{n}\")"))
            .unwrap_or_default();
        let repo = match c.repo.as_str() {
            "" => String::new(),
            repo => format!(" in {repo}"),
        };
        ApiError::new(
            StatusCode::CONFLICT,
            "claimed",
            format!(
                "{holder} holds {what}{repo} until {until}{note}, claim {id}: work on something \
                 else, or ask {holder}",
                holder = c.holder,
                what = c.what,
                until = timestamp(c.expires_at),
                id = c.id,
            ),
        )
    }

    /// The body: the error, and the claim in the way.
    pub fn body(&self) -> serde_json::Value {
        let mut body = self.error().body();
        body["claim"] = json!(ClaimView::from(&self.0));
        body
    }
}

impl axum::response::IntoResponse for ClaimTaken {
    fn into_response(self) -> axum::response::Response {
        (StatusCode::CONFLICT, axum::Json(self.body())).into_response()
    }
}
