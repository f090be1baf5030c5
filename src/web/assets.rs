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
