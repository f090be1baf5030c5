//! Signing in and out of the team page, and failures shown as pages.

use super::assets::Assets;
use super::{ASSETS, forms};
use crate::relay::Caller;
use crate::state::AppState;
use crate::wire::ApiError;
use askama::Template;
use axum::{
    Extension,
    body::Body,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};

/// The cookie that marks a credential signed out on this browser.
const SIGNED_OUT: &str = "crosstalk_signed_out";

/// A page about a failure: 401 (with how to get a token), 403, 404, 429…
#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    assets: &'static Assets,
    title: &'static str,
    message: String,
    /// Says how to sign in (a 401).
    sign_in: bool,
}

/// The pages' own layer, outermost of theirs: any failure answered for a
/// page (no credentials, a revoked token, an unknown thread, a rate limit)
/// becomes an HTML page with the same status and headers; a 401 also
/// tells the browser it may ask for Basic credentials, naming the relay.
/// The page's script gets the JSON as the API answers it.
pub async fn page_errors(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // The page's own script reads failures in the API's JSON shape.
    let scripted = forms::from_script(request.headers());
    let response = next.run(request).await;
    if scripted {
        return response;
    }
    let status = response.status();
    let is_html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/html"));
    if !(status.is_client_error() || status.is_server_error()) || is_html {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_owned());
    let sign_in = status == StatusCode::UNAUTHORIZED;
    let page = ErrorPage {
        assets: &ASSETS,
        title: if sign_in {
            "Sign in to crosstalk"
        } else {
            status.canonical_reason().unwrap_or("Error")
        },
        // What the credentials layer says is for agents (send a Bearer
        // token); a person signs in.
        message: if sign_in {
            "This is the team page of a crosstalk relay: sign in to read and answer what \
             your team's agents say."
                .to_owned()
        } else {
            message
        },
        sign_in,
    };
    let html = page.render().unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if status == StatusCode::UNAUTHORIZED {
        parts
            .headers
            .insert(header::WWW_AUTHENTICATE, challenge(&state));
    }
    Response::from_parts(parts, Body::from(html))
}

/// `Basic realm="crosstalk at relay.example.com"`.
fn challenge(state: &AppState) -> HeaderValue {
    let host = crate::host::url_host(&state.config.public_url).unwrap_or_default();
    let realm: String = format!("crosstalk at {host}")
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .filter(|c| *c != '"' && *c != '\\')
        .collect();
    HeaderValue::from_str(&format!("Basic realm=\"{realm}\", charset=\"UTF-8\""))
        .unwrap_or(HeaderValue::from_static("Basic realm=\"crosstalk\""))
}

/// After credentials: a credential this browser signed out with is
/// refused (401) until the person signs in again at `/signin`.
pub async fn signed_out(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let marked = cookie(request.headers(), SIGNED_OUT).map(str::to_owned);
    let caller = request.extensions().get::<Caller>().cloned();
    if let (Some(marked), Some(caller)) = (marked, caller)
        && request.uri().path() != "/signin"
    {
        match forms::signed_out_mark(&state.relay, &caller).await {
            Ok(mark) if mark == marked => {
                return ApiError::unauthorized(
                    "you signed out: sign in again to read the team page",
                )
                .into_response();
            }
            Ok(_) => {}
            Err(error) => return error.into_response(),
        }
    }
    next.run(request).await
}

fn cookie<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// `GET /signout`: marks this credential signed out on this browser and
/// answers 401, so the browser forgets it.
pub(super) async fn sign_out(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let mark = match forms::signed_out_mark(&state.relay, &caller).await {
        Ok(mark) => mark,
        Err(error) => return error.into_response(),
    };
    let secure = if state.config.tls.is_on() {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!("{SIGNED_OUT}={mark}; Path=/; HttpOnly; SameSite=Strict{secure}");
    let mut response =
        ApiError::unauthorized("you are signed out; sign in again with your token").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `GET /signin`: after signing out, forgets the mark and asks for
/// credentials again; signed in, goes to the overview.
pub(super) async fn sign_in(request: Request) -> Response {
    if cookie(request.headers(), SIGNED_OUT).is_some() {
        let mut response =
            ApiError::unauthorized("sign in with your handle and token").into_response();
        response.headers_mut().insert(
            header::SET_COOKIE,
            HeaderValue::from_static(
                "crosstalk_signed_out=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict",
            ),
        );
        return response;
    }
    Redirect::to("/").into_response()
}
