//! Coordinating work over REST: acknowledgements, what is owed, claims,
//! and the files messages carry. The twins of `ack_message`,
//! `open_questions`, `claim`, `release`, `list_claims` and
//! `get_attachment`.

use super::ApiResult;
use crate::model::{Claimed, MessageId};
use crate::relay::Caller;
use crate::state::AppState;
use crate::wire::{
    ApiError, args,
    extract::{Body, Path, Query},
    work::{Acked, ClaimMade, ClaimTaken, Claims, OpenView},
};
use axum::{
    Extension, Json,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};

/// `POST /api/messages/{id}/ack`.
pub(super) async fn ack(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Body(ack): Body<args::Acknowledgement>,
) -> ApiResult<Acked> {
    let acked = state
        .relay
        .ack_message(
            &caller,
            ack.sender.as_deref(),
            MessageId(id),
            ack.result.into(),
            ack.note,
        )
        .await?;
    Ok(Json(Acked::from(&acked)))
}

/// `GET /api/open`.
pub(super) async fn open(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(args): Query<args::AsPerson>,
) -> ApiResult<OpenView> {
    let open = state
        .relay
        .open_questions(&caller, args.sender.as_deref())
        .await?;
    Ok(Json(OpenView::from(&open)))
}

/// `POST /api/claims`: 201 with the claim, or 409 with the one in the way.
pub(super) async fn claim(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(args): Body<args::Claim>,
) -> Result<Response, ApiError> {
    Ok(match state.relay.claim(&caller, args.into()).await? {
        Claimed::Made(claim) => (
            StatusCode::CREATED,
            Json(ClaimMade {
                claim: (&claim).into(),
            }),
        )
            .into_response(),
        Claimed::Taken(theirs) => ClaimTaken(theirs).into_response(),
    })
}

/// `DELETE /api/claims/{id}`.
pub(super) async fn release(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Query(args): Query<args::AsPerson>,
) -> ApiResult<ClaimMade> {
    let claim = state
        .relay
        .release_claim(&caller, args.sender.as_deref(), id)
        .await?;
    Ok(Json(ClaimMade {
        claim: (&claim).into(),
    }))
}

/// `GET /api/claims`.
pub(super) async fn claims(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(args): Query<args::ListClaims>,
) -> ApiResult<Claims> {
    let claims = state.relay.claims(&caller, args.into()).await?;
    Ok(Json(Claims::new(&claims)))
}

/// `GET /api/messages/{id}/attachments/{n}`: the file's bytes, as a
/// download that no browser runs or sniffs.
pub(super) async fn attachment(
    State(state): State<AppState>,
    Path((id, n)): Path<(i64, u32)>,
) -> Result<Response, ApiError> {
    let (file, bytes) = state.relay.attachment(MessageId(id), n).await?;
    let content_type = match file.is_text() {
        true => format!("{}; charset=utf-8", file.content_type),
        false => file.content_type.clone(),
    };
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_DISPOSITION, disposition(&file.name)),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        (header::CONTENT_SECURITY_POLICY, "sandbox".to_owned()),
    ];
    Ok((headers, bytes).into_response())
}

/// `attachment`, with the name as plain ASCII (others replaced by `_`: a
/// header holds visible ASCII) and whole in RFC 5987's `filename*`.
fn disposition(name: &str) -> String {
    let plain: String = name
        .chars()
        .map(|c| match c {
            ' '..='~' if c != '"' && c != '\\' => c,
            _ => '_',
        })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("attachment; filename=\"{plain}\"; filename*=UTF-8''{encoded}")
}
