//! Claude Code's permission prompts, relayed: each `permission_request`
//! goes to the relay as an approval its person can answer from the team
//! page or their phone, and the answer comes back to Claude Code as a
//! `permission` notification. The terminal's prompt stays open meanwhile;
//! whichever answer Claude Code gets first is the one it uses.

use super::{Bridge, FIRST_BACKOFF, MAX_BACKOFF};
use crate::protocol::{PERMISSION_NOTIFICATION, PERMISSION_REQUEST};
use crate::wire::attention::ApprovalView;
use rmcp::{
    RoleServer,
    model::{CustomNotification, ServerNotification},
    service::Peer,
};
use serde::Deserialize;
use serde_json::json;

/// How long one wait for the answer asks the relay to hold on.
const WAIT_SECONDS: u32 = 50;

/// What Claude Code sends.
#[derive(Debug, Deserialize)]
struct PermissionRequest {
    request_id: String,
    tool_name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    input_preview: String,
}

impl Bridge {
    /// Takes a notification from Claude Code: a permission request is
    /// relayed in the background; anything else is not the bridge's.
    pub(super) fn on_client_notification(
        &self,
        notification: CustomNotification,
        client: Peer<RoleServer>,
    ) {
        if notification.method != PERMISSION_REQUEST {
            return;
        }
        let request = match notification.params_as::<PermissionRequest>() {
            Ok(Some(request)) => request,
            Ok(None) | Err(_) => {
                tracing::warn!("a permission request without its fields; not relayed");
                return;
            }
        };
        let bridge = self.clone();
        tokio::spawn(async move { bridge.relay_permission(request, client).await });
    }

    /// Asks the relay, waits for the person's answer, and passes it on.
    async fn relay_permission(&self, request: PermissionRequest, client: Peer<RoleServer>) {
        let http = reqwest::Client::new();
        let Some(approval) = self.ask(&http, &request).await else {
            return;
        };
        tracing::info!(
            id = approval.id,
            "a permission request waits for its person on the relay"
        );
        let answered = self.answer_to(&http, approval.id).await;
        let behavior = match answered.state.as_str() {
            "allowed" => "allow",
            "denied" => "deny",
            _ => {
                tracing::info!(
                    id = answered.id,
                    "a permission request expired unanswered on the relay"
                );
                return;
            }
        };
        let notification = CustomNotification::new(
            PERMISSION_NOTIFICATION,
            Some(json!({ "request_id": request.request_id, "behavior": behavior })),
        );
        match client
            .send_notification(ServerNotification::CustomNotification(notification))
            .await
        {
            Ok(()) => tracing::info!(
                id = answered.id,
                behavior,
                "passed the person's answer to Claude Code"
            ),
            Err(error) => tracing::warn!(%error, "cannot pass the person's answer to Claude Code"),
        }
    }

    /// Puts the request on the relay for its person: the approval made, or
    /// none when the relay cannot be asked (the terminal asks instead).
    async fn ask(
        &self,
        http: &reqwest::Client,
        request: &PermissionRequest,
    ) -> Option<ApprovalView> {
        let asked = json!({
            "request_id": request.request_id,
            "tool_name": request.tool_name,
            "description": request.description,
            "input_preview": request.input_preview,
        });
        let sent = http
            .post(format!("{}/api/approvals", self.url))
            .bearer_auth(&self.token)
            .json(&asked)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        match sent {
            Ok(response) => match response.json().await {
                Ok(approval) => Some(approval),
                Err(error) => {
                    tracing::warn!(%error, "the relay's answer to a permission request was not understood");
                    None
                }
            },
            Err(error) => {
                tracing::warn!(%error, "cannot relay a permission request; answer it in the terminal");
                None
            }
        }
    }

    /// Waits on the relay until approval `id` is answered or expires,
    /// trying again with a growing pause while the relay cannot be reached.
    async fn answer_to(&self, http: &reqwest::Client, id: i64) -> ApprovalView {
        let url = format!(
            "{}/api/approvals/{id}?wait_seconds={WAIT_SECONDS}",
            self.url
        );
        let mut backoff = FIRST_BACKOFF;
        loop {
            let outcome = http
                .get(&url)
                .bearer_auth(&self.token)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status);
            let view = match outcome {
                Ok(response) => response.json::<ApprovalView>().await,
                Err(error) => Err(error),
            };
            match view {
                Ok(view) if view.is_pending() => backoff = FIRST_BACKOFF,
                Ok(view) => return view,
                Err(error) => {
                    tracing::warn!(%error, "waiting for a permission answer failed; trying again in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}
