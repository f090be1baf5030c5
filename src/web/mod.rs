//! The team page: server-rendered (askama), for reading, following live
//! and writing. People sign in with HTTP Basic, their token as the
//! password. Every page works without script; `static/live.js` (never an
//! inline script) makes times relative, follows conversations live, and
//! sends forms in place. Message bodies are Markdown made safe
//! ([`markdown`]); every other byte of text is escaped by the templates.
//!
//! Here: the routes, rendering and the frame every page shares.
//! `assets.rs` the hashed static files; `signin.rs` signing in and out and
//! failures as pages; `pages.rs` the page handlers; `forms.rs` the writes;
//! `views.rs` what templates show.

mod assets;
mod attention;
mod forms;
mod markdown;
mod oauth;
mod pages;
mod signin;
mod views;

pub use assets::{ASSETS, assets};
pub use oauth::consent;
pub use signin::{page_errors, signed_out};
pub use views::PAGE_HTML;

use crate::model::ThreadId;
use crate::relay::Caller;
use crate::state::AppState;
use crate::wire::ApiError;
use askama::Template;
use axum::{
    Router,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};
use views::Frame;

/// The pages: they need credentials (Basic, from a browser) and answer at once.
pub fn pages() -> Router<AppState> {
    Router::new()
        .route("/", get(pages::overview))
        .route("/threads/{id}", get(pages::thread).post(forms::reply))
        .route("/channels/{channel}", get(pages::channel).post(forms::post))
        .route("/threads/{id}/messages", get(pages::thread_fragment))
        .route("/channels/{channel}/messages", get(pages::channel_fragment))
        .route("/new", axum::routing::post(forms::start))
        .route("/status", axum::routing::post(forms::status))
        .route("/search", get(pages::search))
        .route("/approvals", get(attention::approvals))
        .route("/approvals/{id}", axum::routing::post(attention::answer))
        .route(
            "/settings",
            get(attention::settings).post(attention::save_settings),
        )
        .route(
            "/settings/devices",
            axum::routing::post(attention::add_device),
        )
        .route(
            "/settings/devices/{id}/remove",
            axum::routing::post(attention::remove_device),
        )
        .route(
            "/settings/grants/{id}/revoke",
            axum::routing::post(attention::revoke_grant),
        )
        .route("/signout", get(signin::sign_out))
        .route("/signin", get(signin::sign_in))
}

/// A page that could not be rendered: a bug of ours, logged with its cause.
#[derive(Debug, thiserror::Error)]
#[error("rendering a page failed")]
struct RenderError(#[source] askama::Error);

/// How many pages render at once. A render holds a core while it runs,
/// so more than the machine has would only make each slower; the rest
/// wait their turn, and a view whose client leaves while it waits costs
/// nothing.
const RENDERS_AT_ONCE: usize = 2;
static RENDERS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(RENDERS_AT_ONCE);

/// A page being built on a blocking thread: whether its request is still
/// there to take it. Nothing can stop a blocking thread, so the building
/// asks between messages and skips what is left once the request ended.
pub(crate) struct Rendering(Arc<AtomicBool>);

impl Rendering {
    pub(crate) fn abandoned(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Marks the page abandoned when the request's future is dropped before
/// the page came back.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Builds a page and renders it on a blocking thread, never on the async
/// workers: a page of long messages takes milliseconds to render (its
/// Markdown the first time, its template every time), and `/healthz`,
/// streams and every other request must not wait behind it. At most
/// [`RENDERS_AT_ONCE`] run together, and one whose request ends stops
/// rendering messages.
async fn render<T: Template>(
    build: impl FnOnce(&Rendering) -> T + Send + 'static,
) -> Result<Response, ApiError> {
    let turn = RENDERS
        .acquire()
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let abandoned = Arc::new(AtomicBool::new(false));
    let rendering = Rendering(abandoned.clone());
    let _abandon = AbandonOnDrop(abandoned);
    let html = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        build(&rendering).render()
    })
    .await
    .map_err(|e| ApiError::internal(&e))?
    .map_err(|e| ApiError::internal(&RenderError(e)))?;
    Ok(Html(html).into_response())
}

async fn frame(state: &AppState, caller: &Caller) -> Result<Frame, ApiError> {
    let csrf = forms::token_of(&state.relay, caller).await?;
    Ok(Frame::of(&state.relay, caller, csrf).await?)
}

/// What a person wrote in a form: sent, or shown again if refused.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Draft {
    pub body: String,
    /// The type label; empty for the default.
    pub kind: String,
    /// A recipient's handle; empty for nobody (a reply ignores it).
    pub to: String,
}

/// A refusal and the draft it refused.
type Refusal = Option<(String, Draft)>;

/// A page a form can be on.
pub enum ConversationPage {
    Overview,
    Thread(ThreadId),
    Channel(String),
}
