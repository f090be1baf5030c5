//! Coordinating work over REST: acknowledgements, what is owed, claims.
//! The twins of `ack_message`, `open_questions`, `claim`, `release` and
//! `list_claims`.

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
    http::StatusCode,
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
