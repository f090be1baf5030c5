//! OAuth's machine endpoints: the protected resource's metadata (RFC
//! 9728), the authorization server's (RFC 8414), Dynamic Client
//! Registration (RFC 7591), the token endpoint and revocation (RFC 7009).
//! They take no credential (a public client has none) and count against
//! the client address's quota. Their answers and refusals are OAuth's own
//! shapes (`{"error", "error_description"}`), never cached. The consent
//! page, which a person answers, is the team page's (`web/oauth/`).

use crate::host::ClientAddress;
use crate::model::ClientMetadata;
use crate::relay::{Audience, Issued, Relay, RelayError, SCOPE, TokenRefusal};
use crate::state::AppState;
use crate::wire::ApiError;
use crate::wire::challenge::Challenge;
use axum::{
    Extension, Json, Router,
    body::Bytes,
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use std::{collections::HashMap, net::IpAddr};

/// Where a relay's protected resource metadata is, for the `/mcp` path
/// (the route below names it as a literal, as the route matrix reads it).
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// The routes, all without credentials.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/.well-known/oauth-protected-resource", get(resource))
        .route("/.well-known/oauth-protected-resource/mcp", get(resource))
        .route(
            "/.well-known/oauth-protected-resource/a2a",
            get(|state| resource_for(state, Audience::A2a)),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(authorization_server),
        )
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
}

/// Dynamic Client Registration, which has a budget of its own.
pub fn registration() -> Router<AppState> {
    Router::new().route("/oauth/register", post(register))
}

/// The `WWW-Authenticate` a 401 on `/mcp` carries: where an OAuth client
/// signs in, but not for a request with a person's static token (a valid
/// one is served; a refused one is told so and sent nowhere).
pub fn challenge(public_url: &str) -> Challenge {
    let sign_in = format!(
        "Bearer realm=\"crosstalk\", resource_metadata=\"{public_url}{RESOURCE_METADATA_PATH}\", \
         scope=\"{SCOPE}\""
    );
    let header =
        |value: &str| HeaderValue::from_str(value).unwrap_or(HeaderValue::from_static("Bearer"));
    Challenge {
        token_refused: header(&format!(
            "{sign_in}, error=\"invalid_token\", error_description=\"the token is unknown, \
             expired or revoked\""
        )),
        sign_in: header(&sign_in),
        person_token_refused: HeaderValue::from_static(
            "Bearer realm=\"crosstalk\", error=\"invalid_token\", error_description=\"the \
             token is unknown or was revoked or rotated: ask for a new one (crosstalk rotate)\"",
        ),
    }
}

/// How these endpoints say no: in OAuth's shape, with the status the
/// endpoint answers it with; a failure of the relay in the API's.
enum Refusal {
    OAuth(StatusCode, &'static str, String),
    Relay(Box<ApiError>),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::OAuth(status, code, description) => {
                let body = json!({ "error": code, "error_description": description });
                let mut response = (status, Json(body)).into_response();
                no_store(&mut response);
                response
            }
            Refusal::Relay(error) => error.into_response(),
        }
    }
}

impl From<RelayError> for Refusal {
    fn from(error: RelayError) -> Refusal {
        Refusal::Relay(Box::new(error.into()))
    }
}

fn oauth_error(status: StatusCode, code: &'static str, description: &str) -> Refusal {
    Refusal::OAuth(status, code, description.to_owned())
}

fn no_store(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}

/// `GET /.well-known/oauth-protected-resource` (and `…/mcp`).
async fn resource(state: State<AppState>) -> Json<Value> {
    resource_for(state, Audience::Mcp).await
}

/// The metadata of one of the relay's protected resources (RFC 9728): the
/// MCP endpoint, or the A2A agents (`…/a2a`).
async fn resource_for(State(state): State<AppState>, audience: Audience) -> Json<Value> {
    let public = &state.config.public_url;
    Json(json!({
        "resource": state.relay.oauth_resource_of(audience),
        "authorization_servers": [public],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": format!("crosstalk at {}", crate::host::url_host(public).unwrap_or_default()),
    }))
}

/// `GET /.well-known/oauth-authorization-server`.
async fn authorization_server(State(state): State<AppState>) -> Json<Value> {
    let public = &state.config.public_url;
    Json(json!({
        "issuer": public,
        "authorization_endpoint": format!("{public}/oauth/authorize"),
        "token_endpoint": format!("{public}/oauth/token"),
        "registration_endpoint": format!("{public}/oauth/register"),
        "revocation_endpoint": format!("{public}/oauth/revoke"),
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": true,
        "authorization_response_iss_parameter_supported": true,
    }))
}

/// The client address the address quota found (`layers/auth.rs` puts it
/// beside every request it counts); the unspecified address if none did.
fn client_address(address: Option<Extension<ClientAddress>>) -> IpAddr {
    address.map_or(
        IpAddr::from([0, 0, 0, 0]),
        |Extension(ClientAddress(ip))| ip,
    )
}

/// `POST /oauth/register`: a public client registers its redirect URIs.
async fn register(
    State(state): State<AppState>,
    address: Option<Extension<ClientAddress>>,
    body: Bytes,
) -> Response {
    let metadata = match ClientMetadata::registration(&body) {
        Ok(metadata) => metadata,
        Err(refusal) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                refusal.code(),
                refusal.description(),
            )
            .into_response();
        }
    };
    let from = client_address(address);
    match state.relay.register_client(metadata, from).await {
        Ok(client) => {
            let mut response = (
                StatusCode::CREATED,
                Json(json!({
                    "client_id": client.id,
                    "client_id_issued_at": crate::model::now_millis() / 1000,
                    "client_name": client.name,
                    "redirect_uris": client.redirect_uris.iter().map(|u| u.as_str()).collect::<Vec<_>>(),
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                })),
            )
                .into_response();
            no_store(&mut response);
            response
        }
        Err(RelayError::Forbidden(why)) => {
            oauth_error(StatusCode::BAD_REQUEST, "invalid_redirect_uri", &why).into_response()
        }
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// A form body's fields; a field given twice is refused (RFC 6749 §3.1).
fn form_fields(body: &[u8]) -> Result<HashMap<String, String>, Refusal> {
    let mut fields = HashMap::new();
    for (name, value) in form_urlencoded::parse(body) {
        if fields
            .insert(name.to_string(), value.into_owned())
            .is_some()
        {
            return Err(oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("{name} is given more than once"),
            ));
        }
    }
    Ok(fields)
}

/// `POST /oauth/token`: a code, or a refresh token, for tokens.
async fn token(
    State(state): State<AppState>,
    address: Option<Extension<ClientAddress>>,
    body: Bytes,
) -> Response {
    let from = client_address(address);
    let fields = match form_fields(&body) {
        Ok(fields) => fields,
        Err(refused) => return refused.into_response(),
    };
    let field = |name: &str| {
        fields
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let required = |name: &'static str| {
        field(name).ok_or_else(|| {
            oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("{name} is required"),
            )
        })
    };
    let answer = async {
        let client_id = required("client_id")?;
        if !known_client(&state.relay, client_id).await? {
            return Err(oauth_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "no client is registered by this id: register again",
            ));
        }
        let issued = match required("grant_type")? {
            "authorization_code" => {
                state
                    .relay
                    .exchange_code(
                        required("code")?,
                        client_id,
                        required("redirect_uri")?,
                        required("code_verifier")?,
                        field("resource"),
                        from,
                    )
                    .await
            }
            "refresh_token" => {
                state
                    .relay
                    .refresh_grant(required("refresh_token")?, client_id, field("resource"))
                    .await
            }
            other => {
                return Err(oauth_error(
                    StatusCode::BAD_REQUEST,
                    "unsupported_grant_type",
                    &format!(
                        "grant_type {other:?} is not supported: authorization_code and \
                         refresh_token are"
                    ),
                ));
            }
        };
        issued.map_err(refusal)
    };
    match answer.await {
        Ok(issued) => tokens(issued),
        Err(refused) => refused.into_response(),
    }
}

/// Whether `client_id` names a client: a metadata document's URL (the code
/// or grant it presents was bound to it at consent), or a registration.
async fn known_client(relay: &Relay, client_id: &str) -> Result<bool, Refusal> {
    if client_id.starts_with("https://") || client_id.starts_with("http://") {
        return Ok(true);
    }
    Ok(relay.registered_client(client_id).await?.is_some())
}

fn refusal(refused: TokenRefusal) -> Refusal {
    match refused {
        TokenRefusal::Refused(code, why) => Refusal::OAuth(StatusCode::BAD_REQUEST, code, why),
        TokenRefusal::Relay(error) => error.into(),
    }
}

fn tokens(issued: Issued) -> Response {
    let mut response = Json(json!({
        "access_token": issued.access_token.expose(),
        "token_type": "Bearer",
        "expires_in": issued.expires_in,
        "refresh_token": issued.refresh_token.expose(),
        "scope": issued.scope,
    }))
    .into_response();
    no_store(&mut response);
    response
}

/// `POST /oauth/revoke`: ends the grant that holds the token. An unknown
/// token is no error (RFC 7009 §2.2).
async fn revoke(State(state): State<AppState>, body: Bytes) -> Response {
    let fields = match form_fields(&body) {
        Ok(fields) => fields,
        Err(refused) => return refused.into_response(),
    };
    let Some(token) = fields.get("token").filter(|t| !t.is_empty()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "token is required",
        )
        .into_response();
    };
    match state.relay.revoke_token(token).await {
        Ok(()) => {
            let mut response = StatusCode::OK.into_response();
            no_store(&mut response);
            response
        }
        Err(error) => ApiError::from(error).into_response(),
    }
}
