//! The relay, as a hook reaches it: a lease of what waits, an approval
//! asked and awaited.

use super::{APPROVAL_WAIT, Input, QUICK};
use crate::wire::{MessageView, Messages, attention::ApprovalView};
use serde_json::{Value, json};
use std::time::Duration;

pub(super) struct Relay {
    pub(super) url: String,
    pub(super) token: String,
    pub(super) http: reqwest::Client,
}

pub(super) enum Failure {
    /// The relay answered no: a revoked token, a bad request.
    Refused(String),
    /// The relay did not answer.
    Away(String),
}

impl Relay {
    /// What waits for the person now, leased to a hook that adds it to the
    /// session's turn (`via: hook`), within [`QUICK`]; none when nothing
    /// waits or the relay is away.
    pub(super) async fn waiting(&self) -> Option<Vec<MessageView>> {
        match tokio::time::timeout(QUICK, self.lease("hook", 0.0)).await {
            Ok(Ok(messages)) if !messages.is_empty() => Some(messages),
            _ => None,
        }
    }

    /// The person's waiting messages, leased to this hook `via` its path,
    /// waiting up to `wait` seconds for one.
    pub(super) async fn lease(&self, via: &str, wait: f64) -> Result<Vec<MessageView>, Failure> {
        let response = self
            .http
            .post(format!("{}/api/inbox/lease", self.url))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs_f64(wait) + Duration::from_secs(10))
            .json(&json!({ "via": via, "timeout_seconds": wait }))
            .send()
            .await
            .map_err(|error| Failure::Away(error.to_string()))?;
        let status = response.status();
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(Failure::Away(format!("status {status}")));
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(Failure::Refused(format!("{status}: {body}")));
        }
        let leased: Messages = response
            .json()
            .await
            .map_err(|error| Failure::Away(error.to_string()))?;
        Ok(leased.messages)
    }

    /// Asks the person to approve the step on the relay, and waits for
    /// their answer: Claude Code's decision, or none (the terminal asks).
    pub(super) async fn approval(&self, input: &Input) -> Option<Value> {
        let asked = json!({
            "request_id": request_id(),
            "tool_name": input.tool_name,
            "description": describe(input),
            "input_preview": preview(&input.tool_input),
        });
        let approval: ApprovalView = self
            .http
            .post(format!("{}/api/approvals", self.url))
            .bearer_auth(&self.token)
            .timeout(QUICK)
            .json(&asked)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .ok()?
            .json()
            .await
            .ok()?;
        let deadline = tokio::time::Instant::now() + APPROVAL_WAIT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            let url = format!(
                "{}/api/approvals/{}?wait_seconds={}",
                self.url,
                approval.id,
                left.as_secs().clamp(1, 50)
            );
            let answered = self
                .http
                .get(url)
                .bearer_auth(&self.token)
                .timeout(Duration::from_secs(60))
                .send()
                .await
                .and_then(reqwest::Response::error_for_status);
            let view = match answered {
                Ok(response) => response.json::<ApprovalView>().await.ok(),
                Err(_) => None,
            };
            let behavior = match view.as_ref().map(|v| v.state.as_str()) {
                Some("allowed") => json!({ "behavior": "allow" }),
                Some("denied") => json!({
                    "behavior": "deny",
                    "message": "Your person denied this step from the crosstalk relay.",
                }),
                Some("pending") => continue,
                // Expired, or the relay away: the terminal asks.
                _ => return None,
            };
            return Some(json!({ "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": behavior,
            } }));
        }
    }
}

/// A request id the relay takes: letters and digits.
fn request_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    format!("hook-{}", u64::from_le_bytes(bytes))
}

/// What the step says it does: its own description, else its tool.
fn describe(input: &Input) -> String {
    match input.tool_input["description"].as_str() {
        Some(description) if !description.trim().is_empty() => description.to_owned(),
        _ => format!("Run {}", input.tool_name),
    }
}

/// The step's input as the person reads it: a command as typed, a file's
/// path, else the input's JSON.
fn preview(input: &Value) -> String {
    for field in ["command", "file_path", "url", "pattern"] {
        if let Some(text) = input[field].as_str() {
            return text.to_owned();
        }
    }
    input.to_string()
}
