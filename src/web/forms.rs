//! Writing from the page: a reply in a thread, a post in a channel, a new
//! conversation, one's own status. Each form takes the same core path as
//! MCP and REST (so secret refusal, limits and quotas hold), and is
//! guarded against other sites twice:
//!
//! - a token bound to the signed-in credential: an HMAC, under the relay's
//!   page key, of the credential's token hash, which another site can
//!   neither read nor make;
//! - the browser's own word on where the request comes from: a
//!   `Sec-Fetch-Site` other than `same-origin`, or an `Origin` other than
//!   the page's, is refused.
//!
//! A page that must have been read before its form is answered (the OAuth
//! consent page) also carries when it was shown, under a MAC of its own.
//!
//! Without script, a form posts and the browser follows a redirect to what
//! it made (303); a refusal renders the page again with the reason and the
//! text as typed. With script (`X-Requested-With: fetch`), the answer is
//! `201` with a `Location`, or `200` with `{"refused": {"code", "message"}}`
//! for the page to show: a refusal is the form's answer, not a failed
//! request, so the browser logs no error for it. (A request refused before
//! the form is read, by a guard or a limit, keeps its status and the
//! API's error shape.)

use super::pages::render_conversation;
use super::{ConversationPage, Draft};
use crate::host::Origin;
use crate::model::{Message, Millis, ThreadId};
use crate::relay::{Caller, ChannelPost, Content, DirectMessage, Relay, RelayError};
use crate::state::AppState;
use crate::wire::{ApiError, extract::Path};
use axum::{
    Extension, Form,
    extract::{FromRequest, FromRequestParts, Request, State},
    http::{HeaderMap, StatusCode, Uri, header},
    response::{IntoResponse, Redirect, Response},
};
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use sha2::Sha256;

type Signer = Hmac<Sha256>;

/// What a form token's MAC is for, beside the credential.
const FORM: &[u8] = b"form";
/// What the MAC of a page's time of showing is for.
const SHOWN: &[u8] = b"shown";

/// The form token of `caller`: the same on every page they load, until
/// their token changes.
pub async fn token_of(relay: &Relay, caller: &Caller) -> Result<String, ApiError> {
    let mac = signer(relay, caller, FORM).await?;
    Ok(base64_url(&mac.finalize().into_bytes()))
}

/// The mark a signed-out credential carries in its cookie: another
/// credential's mark never matches.
pub async fn signed_out_mark(relay: &Relay, caller: &Caller) -> Result<String, ApiError> {
    let mac = signer(relay, caller, b"signed out").await?;
    Ok(base64_url(&mac.finalize().into_bytes()[..16]))
}

/// The mark of a page shown to `caller` at `shown`: the time and its MAC,
/// which only this relay makes, so a form cannot claim to have been on
/// screen longer than it was.
pub async fn shown_mark(relay: &Relay, caller: &Caller, shown: Millis) -> Result<String, ApiError> {
    let mut mac = signer(relay, caller, SHOWN).await?;
    mac.update(&shown.to_be_bytes());
    Ok(format!(
        "{shown}.{}",
        base64_url(&mac.finalize().into_bytes())
    ))
}

/// When the page whose form carries `mark` was shown to `caller`: `None`
/// for a mark this relay did not make for them.
pub async fn shown_at(
    relay: &Relay,
    caller: &Caller,
    mark: &str,
) -> Result<Option<Millis>, ApiError> {
    let Some((shown, presented)) = mark.split_once('.') else {
        return Ok(None);
    };
    let (Ok(shown), Ok(presented)) = (
        shown.parse::<Millis>(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(presented),
    ) else {
        return Ok(None);
    };
    let mut mac = signer(relay, caller, SHOWN).await?;
    mac.update(&shown.to_be_bytes());
    Ok(mac.verify_slice(&presented).is_ok().then_some(shown))
}

async fn signer(relay: &Relay, caller: &Caller, purpose: &[u8]) -> Result<Signer, ApiError> {
    let key = relay.page_key().await?;
    let mut mac = Signer::new_from_slice(&key).map_err(|e| ApiError::internal(&e))?;
    mac.update(purpose);
    mac.update(&[0]);
    match caller.token() {
        Some(hash) => mac.update(hash.as_bytes()),
        // An open relay has no token: bind to the account instead.
        None => mac.update(caller.account().as_bytes()),
    }
    Ok(mac)
}

fn base64_url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A form the page sent, refused by [`guard`] unless it came from this
/// relay's own page for the signed-in credential: who sent it, their
/// request's headers, and what they wrote. Every form handler but the
/// consent page's (whose token comes with its parameters) takes one.
pub(super) struct Guarded<T>(pub Caller, pub HeaderMap, pub T);

/// A form's fields: among them the token [`guard`] checks.
pub(super) trait Guardable: DeserializeOwned + Send {
    fn csrf(&self) -> &str;
}

impl<T: Guardable> FromRequest<AppState> for Guarded<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let Extension(caller) = Extension::<Caller>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let (uri, headers) = (parts.uri.clone(), parts.headers.clone());
        let Form(form) = Form::<T>::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        guard(state, &caller, (&uri, &headers), form.csrf())
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Guarded(caller, headers, form))
    }
}

/// Forms whose token is their field `csrf`.
macro_rules! guardable {
    ($($form:ty),* $(,)?) => {$(
        impl $crate::web::forms::Guardable for $form {
            fn csrf(&self) -> &str {
                &self.csrf
            }
        }
    )*};
}
pub(super) use guardable;

/// Refuses a form that did not come from this relay's own page, before
/// anything is read or stored.
pub(super) async fn guard(
    state: &AppState,
    caller: &Caller,
    (uri, headers): (&Uri, &HeaderMap),
    token: &str,
) -> Result<(), ApiError> {
    let cross_site = || ApiError::forbidden("this form did not come from this relay's page");
    if let Some(site) = headers.get("sec-fetch-site")
        && site.as_bytes() != b"same-origin"
    {
        return Err(cross_site());
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        // Only the page's own origin: not even the origins allowed to call
        // the API (they authenticate with Bearer tokens, never forms).
        let authority = uri
            .authority()
            .map(|a| a.as_str())
            .or_else(|| headers.get(header::HOST).and_then(|h| h.to_str().ok()));
        let tls = state.config.tls.is_on();
        let published = state.config.page_origin.as_ref();
        let own = origin
            .to_str()
            .ok()
            .and_then(Origin::parse)
            .is_some_and(|sent| sent.is_own(tls, authority, published));
        if !own {
            return Err(cross_site());
        }
    }
    // The MAC's own check, in constant time.
    let presented = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .unwrap_or_default();
    let matches = signer(&state.relay, caller, FORM)
        .await?
        .verify_slice(&presented)
        .is_ok();
    if !matches {
        return Err(ApiError::forbidden(
            "this form has expired or belongs to someone else: reload the page and try again",
        ));
    }
    Ok(())
}

/// Whether the page's script sent the form (it wants a short answer).
pub fn from_script(headers: &HeaderMap) -> bool {
    headers
        .get("x-requested-with")
        .is_some_and(|v| v.as_bytes() == b"fetch")
}

/// Where a new message is: its conversation, at its anchor.
fn made(headers: &HeaderMap, location: String) -> Response {
    if from_script(headers) {
        (StatusCode::CREATED, [(header::LOCATION, location)]).into_response()
    } else {
        Redirect::to(&location).into_response()
    }
}

/// A refusal: for the script, its reason as text; without script, the
/// page again with the reason and the text as typed.
async fn refused(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    error: RelayError,
    page: ConversationPage,
    draft: Draft,
) -> Response {
    let error = ApiError::from(error);
    if from_script(headers) {
        // The form's answer, not a failed request: the browser logs none.
        let refusal = serde_json::json!({ "refused": error.body()["error"] });
        return axum::Json(refusal).into_response();
    }
    let status = error.status;
    match render_conversation(state, caller, page, Some((error.message, draft))).await {
        Ok(mut response) => {
            *response.status_mut() = status;
            response
        }
        Err(error) => error.into_response(),
    }
}

/// A form that writes a message: its token, and what was written.
#[derive(Debug, Deserialize)]
pub struct Written {
    csrf: String,
    #[serde(flatten)]
    draft: Draft,
}

guardable!(Written, Status);

/// The answer to a form that wrote a message: where it went, or why not.
async fn answer(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    outcome: Result<Message, RelayError>,
    (page, draft): (ConversationPage, Draft),
) -> Response {
    match outcome {
        Ok(message) => made(headers, super::views::link(&message)),
        Err(error) => refused(state, caller, headers, error, page, draft).await,
    }
}

/// `POST /threads/{id}`: a reply, to the other people in the thread.
pub async fn reply(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Guarded(caller, headers, form): Guarded<Written>,
) -> Result<Response, ApiError> {
    let id = ThreadId(id);
    let thread = state.relay.thread_for_page(id).await?;
    let me = caller.account();
    // To whoever else spoke last; to oneself in a thread of one's own.
    let to = thread
        .iter()
        .rev()
        .flat_map(|m| [Some(&m.from), m.to.as_ref()])
        .flatten()
        .find(|h| h.as_str() != me)
        .map_or_else(|| me.clone(), ToString::to_string);
    let draft = form.draft;
    let message = DirectMessage {
        sender: None,
        to,
        thread_id: Some(id),
        content: Content::text(draft.body.clone(), non_empty(&draft.kind)),
        ..DirectMessage::default()
    };
    let sent = state.relay.send_direct(&caller, message).await;
    let page = (ConversationPage::Thread(id), draft);
    Ok(answer(&state, &caller, &headers, sent, page).await)
}

/// `POST /channels/{channel}`: a post, optionally into someone's inbox.
pub async fn post(
    State(state): State<AppState>,
    Path(channel): Path<String>,
    Guarded(caller, headers, form): Guarded<Written>,
) -> Result<Response, ApiError> {
    let draft = form.draft;
    let post = ChannelPost {
        sender: None,
        channel: channel.clone(),
        recipient: non_empty(&draft.to),
        content: Content::text(draft.body.clone(), non_empty(&draft.kind)),
        ..ChannelPost::default()
    };
    let posted = state.relay.post(&caller, post).await;
    let page = (ConversationPage::Channel(channel), draft);
    Ok(answer(&state, &caller, &headers, posted, page).await)
}

/// `POST /new`: a new thread with a person.
pub async fn start(
    State(state): State<AppState>,
    Guarded(caller, headers, form): Guarded<Written>,
) -> Result<Response, ApiError> {
    let draft = form.draft;
    let message = DirectMessage {
        sender: None,
        to: draft.to.clone(),
        thread_id: None,
        content: Content::text(draft.body.clone(), non_empty(&draft.kind)),
        ..DirectMessage::default()
    };
    let sent = state.relay.send_direct(&caller, message).await;
    let page = (ConversationPage::Overview, draft);
    Ok(answer(&state, &caller, &headers, sent, page).await)
}

#[derive(Debug, Deserialize)]
pub struct Status {
    csrf: String,
    #[serde(default)]
    status: String,
}

/// `POST /status`: the viewer's own status line.
pub async fn status(
    State(state): State<AppState>,
    Guarded(caller, headers, form): Guarded<Status>,
) -> Result<Response, ApiError> {
    state
        .relay
        .set_status(&caller, None, form.status.trim())
        .await?;
    Ok(made(&headers, "/".to_owned()))
}

fn non_empty(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}
