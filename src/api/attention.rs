//! What needs a person's attention: their notification settings and their
//! agents' approvals. Each is the caller's own: the shared token has none.

use super::ApiResult;
use crate::model::{ApprovalId, DeviceId, now_millis};
use crate::relay::Caller;
use crate::state::AppState;
use crate::wire::{
    ApiError,
    attention::{
        AnswerApproval, ApprovalQuery, ApprovalView, Approvals, ApprovalsQuery,
        ChangeNotifications, DeviceView, Devices, NewApprovalArgs, NewDevice, Notifications,
        PushKeyView,
    },
    extract::{Body, Path, Query},
};
use axum::{Extension, Json, extract::State, http::StatusCode};

pub(super) async fn notifications(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Notifications> {
    let settings = state.relay.notify_settings(&caller).await?;
    Ok(Json(Notifications::from(&settings)))
}

pub(super) async fn change_notifications(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(change): Body<ChangeNotifications>,
) -> ApiResult<Notifications> {
    let current = state.relay.notify_settings(&caller).await?;
    let settings = change.apply(current)?;
    let settings = state.relay.set_notify_settings(&caller, settings).await?;
    Ok(Json(Notifications::from(&settings)))
}

pub(super) async fn approvals(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<ApprovalsQuery>,
) -> ApiResult<Approvals> {
    let kept = state.relay.approvals(&caller, query.all).await?;
    Ok(Json(Approvals::new(&kept, now_millis())))
}

pub(super) async fn ask_approval(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(args): Body<NewApprovalArgs>,
) -> Result<(StatusCode, Json<ApprovalView>), ApiError> {
    let approval = state.relay.ask_approval(&caller, args.into()).await?;
    Ok((
        StatusCode::CREATED,
        Json(ApprovalView::new(&approval, now_millis())),
    ))
}

/// One approval; with `wait_seconds`, once it is answered or expires (or
/// the wait ends).
pub(super) async fn approval(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Query(query): Query<ApprovalQuery>,
) -> ApiResult<ApprovalView> {
    let approval = state
        .relay
        .wait_approval(&caller, ApprovalId(id), query.wait_seconds)
        .await?;
    Ok(Json(ApprovalView::new(&approval, now_millis())))
}

pub(super) async fn answer_approval(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Body(answer): Body<AnswerApproval>,
) -> ApiResult<ApprovalView> {
    let approval = state
        .relay
        .answer_approval(
            &caller,
            ApprovalId(id),
            answer.behavior()?,
            answer.input_hidden_ok,
        )
        .await?;
    Ok(Json(ApprovalView::new(&approval, now_millis())))
}

pub(super) async fn push_key(State(state): State<AppState>) -> ApiResult<PushKeyView> {
    let key = state.relay.push_key().await?;
    Ok(Json(PushKeyView {
        public_key: key.public_key_text(),
    }))
}

pub(super) async fn devices(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Devices> {
    let devices = state.relay.devices(&caller).await?;
    Ok(Json(Devices {
        subscriptions: devices.iter().map(DeviceView::from).collect(),
    }))
}

pub(super) async fn add_device(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(device): Body<NewDevice>,
) -> Result<(StatusCode, Json<DeviceView>), ApiError> {
    let added = state
        .relay
        .add_device(
            &caller,
            &device.endpoint,
            &device.keys.p256dh,
            &device.keys.auth,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(DeviceView::from(&added))))
}

pub(super) async fn remove_device(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    state.relay.remove_device(&caller, DeviceId(id)).await?;
    Ok(StatusCode::NO_CONTENT)
}
