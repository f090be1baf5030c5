//! The OAuth consent page: `GET /oauth/authorize` shows a person, signed in
//! as on the team page, which client asks (its name, and the redirect URI
//! it sends them back to, whole, its host set apart) for which scope;
//! `POST /oauth/authorize` is their Allow or Deny, a form guarded as every
//! form of the page.
//!
//! An Allow is taken only once the page has been shown a moment
//! (`Config::consent_delay`): the form carries when it was rendered, under
//! a MAC, and an Allow sooner than that shows the page again, so a click
//! meant for another page that lands on this one as it opens allows
//! nothing. The page's script holds the button likewise until the page
//! has been in view that long without a break. Deny is never held.
//!
//! What the request names is checked before anything is shown, and again
//! when the answer comes: the client (registered, or its metadata document
//! fetched through [`crate::outbound`]'s guards and kept as its cache
//! headers allow, `documents.rs`), the redirect URI against the client's, then PKCE, the
//! resource and the scope. A client or redirect URI that does not check
//! out gets a page, never a redirect (an open redirector otherwise); the
//! rest are sent back to the client as OAuth errors.
//!
//! The page's policy allows its form to lead to the client's redirect
//! origin alone (`form-action`, which browsers apply to the redirect after
//! a submission), and it leaves the opener alone (a connector opens it in
//! a window of its own).

mod documents;

use super::assets::Assets;
use super::{ASSETS, forms};
use crate::layers::edge::CONTENT_SECURITY_POLICY;
use crate::model::{ClientIdUrl, CodeChallenge, Millis, RedirectUri, now_millis};
use crate::outbound;
use crate::relay::{Caller, Client, Consent, Identity};
use crate::state::AppState;
use crate::wire::ApiError;
use askama::Template;
use axum::{
    Extension, Router,
    body::Bytes,
    extract::{RawQuery, State},
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{Html, IntoResponse, Redirect, Response},
    routing::get,
};
use documents::Documents;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The consent routes, with the cache of clients' metadata documents.
pub fn consent(state: &AppState) -> Router<AppState> {
    let documents = Arc::new(Documents {
        client: outbound::client(state.config.oauth_allow_private).ok(),
        allow_private: state.config.oauth_allow_private,
        kept: Mutex::default(),
    });
    Router::new()
        .route("/oauth/authorize", get(show).post(answer))
        .layer(Extension(documents))
}

#[derive(Template)]
#[template(path = "consent.html")]
struct ConsentPage {
    assets: &'static Assets,
    client_name: String,
    client_id: String,
    /// The redirect URI, shown whole: its scheme, its host (set apart, and
    /// named again in the advice), and the rest (port, path, query).
    redirect_scheme: String,
    redirect_host: String,
    redirect_rest: String,
    scope: String,
    viewer: String,
    viewer_name: String,
    csrf: String,
    /// When the page was shown, under its MAC (`forms::shown_mark`).
    shown: String,
    /// Why the page is shown again, if it is.
    notice: Option<String>,
    /// The request's parameters, posted back with the answer.
    fields: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "oauth_error.html")]
struct ErrorPage {
    assets: &'static Assets,
    message: String,
}

/// How the consent routes say no: a page for the person (a client or
/// redirect URI that does not check out is never redirected to), an OAuth
/// error sent back to the client, or a failure of the relay.
enum Refusal {
    Page(StatusCode, String),
    Client(String),
    Relay(Box<ApiError>),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Page(status, message) => {
                let html = ErrorPage {
                    assets: &ASSETS,
                    message,
                }
                .render()
                .unwrap_or_default();
                (status, Html(html)).into_response()
            }
            Refusal::Client(location) => Redirect::to(&location).into_response(),
            Refusal::Relay(error) => error.into_response(),
        }
    }
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Refusal {
        Refusal::Relay(Box::new(error))
    }
}

impl From<crate::relay::RelayError> for Refusal {
    fn from(error: crate::relay::RelayError) -> Refusal {
        ApiError::from(error).into()
    }
}

fn error_page(status: StatusCode, message: String) -> Refusal {
    Refusal::Page(status, message)
}

/// The parameters an authorization request is made of.
const PARAMETERS: [&str; 8] = [
    "response_type",
    "client_id",
    "redirect_uri",
    "code_challenge",
    "code_challenge_method",
    "state",
    "resource",
    "scope",
];

/// A request's parameters; one given twice is refused (RFC 6749 §3.1).
fn parameters(encoded: &[u8]) -> Result<HashMap<String, String>, Refusal> {
    let mut found = HashMap::new();
    for (name, value) in form_urlencoded::parse(encoded) {
        if found.insert(name.to_string(), value.into_owned()).is_some() {
            return Err(error_page(
                StatusCode::BAD_REQUEST,
                format!("The request gives {name} more than once."),
            ));
        }
    }
    Ok(found)
}

/// An authorization request, checked: what a person may allow, and where
/// their answer goes.
struct Checked {
    consent: Consent,
    /// The requested redirect URI, which the answer goes to.
    redirect: RedirectUri,
    state: Option<String>,
    fields: Vec<(String, String)>,
}

/// Checks a request; a refusal is a page, or an error sent to the client.
async fn check(
    state: &AppState,
    documents: &Documents,
    given: &HashMap<String, String>,
) -> Result<Checked, Refusal> {
    let field = |name: &str| {
        given
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let Some(client_id) = field("client_id") else {
        return Err(error_page(
            StatusCode::BAD_REQUEST,
            "The request names no client (client_id).".into(),
        ));
    };
    let client = resolve(state, documents, client_id).await?;
    let redirect = match field("redirect_uri") {
        Some(text) => RedirectUri::parse(text)
            .ok()
            .filter(|requested| client.redirect(requested).is_some()),
        None if client.redirect_uris.len() == 1 => client.redirect_uris.first().cloned(),
        None => None,
    };
    let Some(redirect) = redirect else {
        return Err(error_page(
            StatusCode::BAD_REQUEST,
            format!(
                "The redirect URI is missing or is not one {} registered.",
                client.name
            ),
        ));
    };
    let client_state = field("state").map(str::to_owned);
    let back = |code: &str, why: String| {
        Refusal::Client(to_client(
            state,
            &redirect,
            client_state.as_deref(),
            &[("error", code), ("error_description", &why)],
        ))
    };
    if field("response_type") != Some("code") {
        return Err(back(
            "unsupported_response_type",
            "response_type must be code".into(),
        ));
    }
    let challenge = CodeChallenge::parse(
        field("code_challenge").unwrap_or_default(),
        field("code_challenge_method"),
    )
    .map_err(|why| back("invalid_request", why.to_string()))?;
    let resource = state
        .relay
        .oauth_check_resource(field("resource"))
        .map_err(|why| back("invalid_target", why))?;
    let scope = state
        .relay
        .oauth_check_scope(field("scope"))
        .map_err(|why| back("invalid_scope", why))?;
    let fields = PARAMETERS
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), given.get(*name)?.clone())))
        .collect();
    Ok(Checked {
        consent: Consent {
            client,
            redirect_uri: redirect.clone(),
            challenge,
            resource,
            scope,
        },
        redirect,
        state: client_state,
        fields,
    })
}

/// The client a request names: by its metadata document's URL, or by the
/// id it was registered under.
async fn resolve(
    state: &AppState,
    documents: &Documents,
    client_id: &str,
) -> Result<Client, Refusal> {
    let refused = |why: String| error_page(StatusCode::BAD_REQUEST, why);
    if client_id.contains("://") {
        let url = ClientIdUrl::parse_with(client_id, documents.allow_private)
            .map_err(|why| refused(format!("The client id is not usable: {why}.")))?;
        let metadata = documents.metadata(&url).await.map_err(refused)?;
        return state
            .relay
            .document_client(url.as_str(), metadata)
            .map_err(|error| error_page(StatusCode::FORBIDDEN, error.to_string()));
    }
    match state.relay.registered_client(client_id).await {
        Ok(Some(client)) => Ok(client),
        Ok(None) => Err(refused(format!(
            "No client is registered as {client_id:?} (a registration unused for a day is \
             forgotten: the app registers again)."
        ))),
        Err(error) => Err(error.into()),
    }
}

/// The client's redirect URI with `answer`, its `state` and this
/// server's `iss` (RFC 9207): where a 303 sends the person.
fn to_client(
    state: &AppState,
    redirect: &RedirectUri,
    client_state: Option<&str>,
    answer: &[(&str, &str)],
) -> String {
    let mut url = url::Url::parse(redirect.as_str()).expect("a redirect URI is a URL");
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in answer {
            query.append_pair(name, value);
        }
        if let Some(client_state) = client_state {
            query.append_pair("state", client_state);
        }
        query.append_pair("iss", &state.config.public_url);
    }
    url.into()
}

/// Only a person signed in with their own token may answer for a client.
fn person(caller: &Caller) -> Result<(), Refusal> {
    match caller.identity() {
        Identity::Person(_) if caller.grant().is_none() => Ok(()),
        _ => Err(error_page(
            StatusCode::FORBIDDEN,
            "Sign in with your own crosstalk token to allow an app (the relay's shared token \
             is nobody's)."
                .into(),
        )),
    }
}

/// `GET /oauth/authorize`: the consent page.
async fn show(
    State(state): State<AppState>,
    Extension(documents): Extension<Arc<Documents>>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Response, Refusal> {
    person(&caller)?;
    let given = parameters(query.unwrap_or_default().as_bytes())?;
    let checked = check(&state, &documents, &given).await?;
    consent_page(&state, &caller, checked, None).await
}

/// The consent page for a checked request, with `notice` when it is shown
/// again; marked with the time it is rendered.
async fn consent_page(
    state: &AppState,
    caller: &Caller,
    checked: Checked,
    notice: Option<String>,
) -> Result<Response, Refusal> {
    let Checked {
        consent,
        redirect,
        fields,
        ..
    } = checked;
    let csrf = forms::token_of(&state.relay, caller).await?;
    let shown = forms::shown_mark(&state.relay, caller, now_millis()).await?;
    let handle = state.relay.acting_as(caller, None)?;
    let name = state
        .relay
        .team()
        .people()
        .await?
        .into_iter()
        .find(|p| p.handle == handle)
        .map_or_else(|| handle.to_string(), |p| p.name);
    let (scheme, host, rest) = redirect.parts();
    let page = ConsentPage {
        assets: &ASSETS,
        client_name: consent.client.name,
        client_id: consent.client.id,
        redirect_scheme: scheme.to_owned(),
        redirect_host: host.to_owned(),
        redirect_rest: rest.to_owned(),
        scope: consent.scope,
        viewer: handle.to_string(),
        viewer_name: name,
        csrf,
        shown,
        notice,
        fields,
    };
    let html = page.render().map_err(|e| ApiError::internal(&e))?;
    let mut response = Html(html).into_response();
    let headers = response.headers_mut();
    let origin = url::Url::parse(redirect.as_str())
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default();
    let policy = CONTENT_SECURITY_POLICY.replace(
        "form-action 'self'",
        &format!("form-action 'self' {origin}"),
    );
    if let Ok(policy) = HeaderValue::from_str(&policy) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("unsafe-none"),
    );
    Ok(response)
}

/// How long a consent page's Allow may be taken after it was shown: a page
/// left open for longer (a tab brought forward later, under whatever was
/// clicked then) is shown again.
const CONSENT_MARK_LIFETIME: Millis = 10 * 60 * 1000;

/// Whether the page whose form carries `mark` was shown to `caller` at
/// least the configured delay ago, and not longer than
/// [`CONSENT_MARK_LIFETIME`]. A mark this relay did not make for them
/// counts as a page shown just now.
async fn read_long_enough(
    state: &AppState,
    caller: &Caller,
    mark: Option<&str>,
) -> Result<bool, Refusal> {
    let shown = match mark {
        Some(mark) => forms::shown_at(&state.relay, caller, mark).await?,
        None => None,
    };
    let delay = i64::try_from(state.config.consent_delay.as_millis()).unwrap_or(i64::MAX);
    Ok(shown.is_some_and(|at| {
        let shown_for = now_millis().saturating_sub(at);
        (delay..=CONSENT_MARK_LIFETIME).contains(&shown_for)
    }))
}

/// What the page says when it is shown again for an Allow that came too
/// soon.
const TOO_SOON: &str = "Allow was pressed as this page opened, before it could be read, so \
                        nothing was allowed. Read it, and if you started connecting this app, \
                        press Allow again.";

/// `POST /oauth/authorize`: the person's Allow or Deny.
async fn answer(
    State(state): State<AppState>,
    Extension(documents): Extension<Arc<Documents>>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Refusal> {
    person(&caller)?;
    let given = parameters(&body)?;
    let csrf = given.get("csrf").map(String::as_str).unwrap_or_default();
    forms::guard(&state, &caller, (&uri, &headers), csrf).await?;
    let checked = check(&state, &documents, &given).await?;
    let client_state = checked.state.clone();
    let location = match given.get("decision").map(String::as_str) {
        Some("allow") => {
            let shown = given.get("shown").map(String::as_str);
            if !read_long_enough(&state, &caller, shown).await? {
                let notice = Some(TOO_SOON.to_owned());
                return consent_page(&state, &caller, checked, notice).await;
            }
            let code = state.relay.allow(&caller, checked.consent).await?;
            to_client(
                &state,
                &checked.redirect,
                client_state.as_deref(),
                &[("code", code.expose())],
            )
        }
        Some("deny") => to_client(
            &state,
            &checked.redirect,
            client_state.as_deref(),
            &[
                ("error", "access_denied"),
                ("error_description", "the person denied the request"),
            ],
        ),
        _ => {
            return Err(error_page(
                StatusCode::BAD_REQUEST,
                "Answer with Allow or Deny.".into(),
            ));
        }
    };
    Ok(Redirect::to(&location).into_response())
}
