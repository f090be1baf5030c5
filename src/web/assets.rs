//! The page's static files, named by a hash of their content.

use crate::state::AppState;
use crate::wire::{ApiError, extract::Path};
use axum::{
    Router,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use std::sync::LazyLock;

/// The page's static files, named by a hash of their content so an upgrade
/// is never served stale: no credentials, so the sign-in page is styled.
pub fn assets() -> Router<AppState> {
    Router::new()
        .route("/static/{file}", get(asset))
        .route("/favicon.ico", get(favicon))
        .route("/manifest.webmanifest", get(manifest))
        .route("/sw.js", get(service_worker))
}

/// One static file: its hashed path, type and content.
pub struct Asset {
    pub path: String,
    content_type: &'static str,
    body: &'static str,
}

impl Asset {
    fn new(name: &str, extension: &str, content_type: &'static str, body: &'static str) -> Asset {
        use sha2::Digest;
        let hash = sha2::Sha256::digest(body.as_bytes());
        let short: String = hash[..5].iter().map(|b| format!("{b:02x}")).collect();
        Asset {
            path: format!("/static/{name}.{short}.{extension}"),
            content_type,
            body,
        }
    }
}

/// The stylesheet and the script, as every page links them.
pub struct Assets {
    pub css: Asset,
    pub js: Asset,
}

pub static ASSETS: LazyLock<Assets> = LazyLock::new(|| Assets {
    css: Asset::new(
        "app",
        "css",
        "text/css; charset=utf-8",
        include_str!("../../static/app.css"),
    ),
    js: Asset::new(
        "live",
        "js",
        "text/javascript; charset=utf-8",
        include_str!("../../static/live.js"),
    ),
});

async fn asset(Path(file): Path<String>) -> Response {
    let path = format!("/static/{file}");
    match [&ASSETS.css, &ASSETS.js]
        .into_iter()
        .find(|a| a.path == path)
    {
        Some(asset) => (
            [
                (header::CONTENT_TYPE, asset.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            asset.body,
        )
            .into_response(),
        None => ApiError::new(StatusCode::NOT_FOUND, "not_found", "there is no such file")
            .into_response(),
    }
}

async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("../../static/favicon.svg"),
    )
        .into_response()
}

/// What makes the page installable (a web app manifest).
async fn manifest() -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/manifest+json"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("../../static/manifest.webmanifest"),
    )
        .into_response()
}

/// The service worker, at the root so its scope is the whole page, and
/// never cached long: a browser checks it for updates.
async fn service_worker() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        include_str!("../../static/sw.js"),
    )
        .into_response()
}
