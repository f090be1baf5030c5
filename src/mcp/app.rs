//! The MCP App (`io.modelcontextprotocol/ui`, 2026-01-26): one `ui://`
//! resource, the person's inbox, a thread, and their pending approvals with
//! Allow and Deny (`app.html`), which hosts that render apps show beside
//! the tools it goes with.
//!
//! - The page is whole in itself: its script and style inline, nothing
//!   loaded, every text shown as text. Its CSP declares no other origin of
//!   any kind, so a host lets it reach nothing; it calls the relay's tools
//!   only through the host.
//! - `check_inbox` and `read_thread` name it, for the model and the app.
//! - `list_approvals` and `answer_approval` name it for the app alone, and
//!   are listed, and answered, only on a session whose client says it
//!   renders apps. That keeps them out of an agent's tool list (Claude
//!   Code's, the bridge's), so no model is offered a tool that allows its
//!   own steps; it is not a security boundary: a client may say what it
//!   likes, and the person's token answers approvals through the API
//!   (`POST /api/approvals/{id}`) as it always could.

use super::{CallerOf, Parameters, RelayTools, ToolError, ToolResult};
use crate::model::{ApprovalId, now_millis};
use crate::wire::{ApiError, attention};
use rmcp::{
    ErrorData, Json,
    handler::server::common::{AsRequestContext, FromContextPart},
    model::{MetaObject, ReadResourceResult, Resource, ResourceContents},
    tool, tool_router,
};
use serde_json::{Value, json};

/// The resource's URI.
pub const URI: &str = "ui://crosstalk/inbox.html";
/// The media type hosts render as an app.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";

const HTML: &str = include_str!("app.html");

fn meta(value: Value) -> MetaObject {
    match value {
        Value::Object(object) => MetaObject(object),
        _ => unreachable!("a literal object"),
    }
}

/// The resource's `_meta.ui`: a CSP that allows no other origin, and a
/// border.
fn resource_meta() -> MetaObject {
    meta(json!({ "ui": {
        "csp": {
            "connectDomains": [],
            "resourceDomains": [],
            "frameDomains": [],
            "baseUriDomains": [],
        },
        "prefersBorder": true,
    } }))
}

/// A tool's `_meta` naming the app, for the model and the app (with the
/// legacy key too, for hosts that read only it), or for the app alone
/// (without it: a host that reads only the legacy key knows no visibility,
/// and would offer the tool to its model).
pub fn for_tool(app_only: bool) -> MetaObject {
    match app_only {
        true => meta(json!({ "ui": { "resourceUri": URI, "visibility": ["app"] } })),
        false => meta(json!({
            "ui": { "resourceUri": URI, "visibility": ["model", "app"] },
            "ui/resourceUri": URI,
        })),
    }
}

/// What `resources/list` lists.
pub fn listed() -> Resource {
    Resource::new(URI, "inbox")
        .with_title("crosstalk: inbox, threads and approvals")
        .with_description(
            "Your messages, a thread, and your agents' steps waiting for your Allow or Deny",
        )
        .with_mime_type(MIME_TYPE)
        .with_meta(resource_meta())
}

/// What `resources/read` of [`URI`] returns.
pub fn read() -> ReadResourceResult {
    ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: URI.to_owned(),
        mime_type: Some(MIME_TYPE.to_owned()),
        text: HTML.to_owned(),
        meta: Some(resource_meta()),
    }])
}

/// The app's own tools.
#[tool_router(router = app_tools, vis = "pub(super)")]
impl RelayTools {
    /// Your agents' steps waiting for your Allow or Deny (with all: every
    /// one kept, a week's). For the crosstalk app, where you answer them.
    #[tool(meta = for_tool(true))]
    async fn list_approvals(
        &self,
        CallerOf(caller): CallerOf,
        RendersApps(renders): RendersApps,
        Parameters(args): Parameters<attention::ApprovalsQuery>,
    ) -> ToolResult<attention::Approvals> {
        renders.then_some(()).ok_or_else(only_in_the_app)?;
        let kept = self.relay.approvals(&caller, args?.all).await?;
        Ok(Json(attention::Approvals::new(&kept, now_millis())))
    }

    /// Allow or deny one of your agents' steps. For the crosstalk app: a
    /// person's answer, pressed in the app.
    #[tool(meta = for_tool(true))]
    async fn answer_approval(
        &self,
        CallerOf(caller): CallerOf,
        RendersApps(renders): RendersApps,
        Parameters(args): Parameters<attention::AnswerApprovalArgs>,
    ) -> ToolResult<attention::ApprovalView> {
        renders.then_some(()).ok_or_else(only_in_the_app)?;
        let args = args?;
        let approval = self
            .relay
            .answer_approval(
                &caller,
                ApprovalId(args.id),
                args.answer.behavior()?,
                args.answer.input_hidden_ok,
            )
            .await?;
        Ok(Json(attention::ApprovalView::new(&approval, now_millis())))
    }
}

/// The tools only the app calls (`_meta.ui.visibility: ["app"]`): listed,
/// and answered, only to a client that renders apps.
pub(super) const APP_ONLY: [&str; 2] = ["list_approvals", "answer_approval"];

/// Whether the tool call's client renders MCP Apps (said at `initialize`,
/// or in a stateless request's own capabilities).
pub struct RendersApps(pub bool);

impl<C: AsRequestContext> FromContextPart<C> for RendersApps {
    fn from_context_part(context: &mut C) -> Result<Self, ErrorData> {
        Ok(RendersApps(super::context::renders_apps(
            context.as_request_context(),
        )))
    }
}

/// The refusal of an app's tool to a client that renders no app: an
/// agent's own client never allows its agent's steps.
fn only_in_the_app() -> ToolError {
    ApiError::new(
        axum::http::StatusCode::FORBIDDEN,
        "forbidden",
        "this tool answers only in the crosstalk app, in a host that renders MCP Apps; \
         answer approvals there, on the team page, or on your phone",
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_and_shows_text_as_text() {
        for loading in [
            "src=",
            ".src",
            "href=",
            "@import",
            "url(",
            "fetch(",
            "XMLHttpRequest",
            "WebSocket",
            "EventSource",
            "sendBeacon",
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "Function(",
            "import(",
        ] {
            assert!(!HTML.contains(loading), "app.html has {loading}");
        }
        assert!(HTML.starts_with("<!DOCTYPE html>"));
    }
}
