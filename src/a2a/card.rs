//! An agent's card (A2A 1.0's `AgentCard`): where and how to ask a
//! person's agent. It is the same for any well-formed handle, whether or
//! not such a person is on the team, and names nobody's full name, so it
//! tells no more than its URL and needs no credential.

use super::VERSION;
use crate::model::Handle;
use crate::relay::SCOPE;
use crate::state::AppState;
use crate::wire::ApiError;
use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde_json::{Value, json};

pub(super) async fn card(
    State(state): State<AppState>,
    Path(handle): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let handle = Handle::parse(&handle).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no agent card here: /a2a/{handle} takes a person's handle",
        )
    })?;
    let public = &state.config.public_url;
    let url = format!("{public}/a2a/{handle}");
    Ok(Json(json!({
        "name": format!("{handle}'s agent"),
        "description": format!(
            "The coding agent of {handle}, on this team's crosstalk relay. A message sent \
             here reaches {handle}'s agent (or {handle}, told when no agent is there) as a \
             direct message; the task completes with their answer."
        ),
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": url,
            "protocolBinding": "JSONRPC",
            "protocolVersion": VERSION,
        }],
        "provider": { "organization": "crosstalk", "url": public },
        "capabilities": { "streaming": true, "pushNotifications": false },
        "securitySchemes": {
            "bearer": { "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "The sender's crosstalk token (`crosstalk add` prints it).",
            } },
            "oauth": { "oauth2SecurityScheme": {
                "description": format!(
                    "The relay's own OAuth: the sender signs in on its page as themselves. \
                     Ask for the resource {public}/a2a; a token for another resource (its \
                     MCP endpoint's) is not taken here."
                ),
                "flows": { "authorizationCode": {
                    "authorizationUrl": format!("{public}/oauth/authorize"),
                    "tokenUrl": format!("{public}/oauth/token"),
                    "refreshUrl": format!("{public}/oauth/token"),
                    "scopes": { SCOPE: "act as yourself on this relay" },
                    "pkceRequired": true,
                } },
                "oauth2MetadataUrl": format!("{public}/.well-known/oauth-authorization-server"),
            } },
        },
        "securityRequirements": [
            { "schemes": { "bearer": { "list": [] } } },
            { "schemes": { "oauth": { "list": [SCOPE] } } },
        ],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "ask",
            "name": format!("ask {handle}'s agent"),
            "description": format!(
                "Ask {handle}'s agent something only they know; the answer is theirs."
            ),
            "tags": ["question", "team"],
            "examples": ["Which port does the staging database listen on?"],
        }],
    })))
}
