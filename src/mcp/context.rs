//! What a tool takes from its call — the caller the auth layer proved, the
//! session it runs in, its arguments — and how it fails: with the same JSON
//! error shape as REST, so a model reads what to change.

use super::sessions::HeldSession;
use crate::model::SessionId;
use crate::protocol::{self, wants_pushes};
use crate::relay::{Caller, RelayError};
use crate::wire::ApiError;
use rmcp::{
    ErrorData, Json,
    handler::server::{
        common::{AsRequestContext, FromContextPart},
        tool::ToolCallContext,
    },
    model::{ContentBlock, IntoContents},
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

/// The caller of a tool, as proven by the request's credential.
pub struct CallerOf(pub Caller);

impl<C: AsRequestContext> FromContextPart<C> for CallerOf {
    fn from_context_part(context: &mut C) -> Result<Self, ErrorData> {
        context
            .as_request_context()
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .map(CallerOf)
            .ok_or_else(|| ErrorData::internal_error("the request carries no caller", None))
    }
}

/// The MCP session a tool call comes in on, as the session layer verified
/// the caller holds it. A stateless call (2026-07-28) has none.
pub struct SessionOf(pub SessionId);

impl<C: AsRequestContext> FromContextPart<C> for SessionOf {
    fn from_context_part(context: &mut C) -> Result<Self, ErrorData> {
        held_session(context.as_request_context())
            .map(SessionOf)
            .ok_or_else(|| {
                ErrorData::invalid_request(
                    "this call needs an MCP session that listens for channel events: connect \
                     to /mcp?push=1 with the initialize handshake (or use the inbox stream's \
                     ?follow=)",
                    None,
                )
            })
    }
}

/// The session the caller holds, if the request came on one.
pub(super) fn held_session(
    context: &rmcp::service::RequestContext<rmcp::RoleServer>,
) -> Option<SessionId> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<HeldSession>())
        .map(|held| held.id.clone())
}

/// Whether the request's client renders MCP Apps: said in a stateless
/// request's own capabilities, or at its session's `initialize`.
pub(super) fn renders_apps(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    protocol::renders_apps(context.client_capabilities().as_ref())
        || context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<HeldSession>())
            .is_some_and(|held| held.renders_apps)
}

/// Whether the request asked for pushes (`?push=1`).
pub(super) fn asks_for_pushes(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .is_some_and(|parts| wants_pushes(&parts.uri))
}

/// A failed tool call: the REST error body, as text a model can read.
pub struct ToolError(pub(super) serde_json::Value);

impl IntoContents for ToolError {
    fn into_contents(self) -> Vec<ContentBlock> {
        vec![ContentBlock::text(self.0.to_string())]
    }
}

impl From<ApiError> for ToolError {
    fn from(error: ApiError) -> Self {
        ToolError(error.body())
    }
}

impl From<RelayError> for ToolError {
    fn from(error: RelayError) -> Self {
        ApiError::from(error).into()
    }
}

pub(super) type ToolResult<T> = Result<Json<T>, ToolError>;

/// A tool's arguments, or the reason they could not be read.
///
/// rmcp's own `Parameters` answers arguments of the wrong shape with a plain
/// text error; this one lets the tool answer with the same JSON error shape
/// as every other refusal (`bad_request`). rmcp's `#[tool]` finds the input
/// schema by this type's name, and the schema is `T`'s.
pub struct Parameters<T>(pub Result<T, ToolError>);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        Ok(Parameters(
            serde_json::from_value(serde_json::Value::Object(arguments)).map_err(|error| {
                ApiError::bad_request(format!("invalid arguments: {error}")).into()
            }),
        ))
    }
}
