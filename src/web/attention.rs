//! What needs the viewer's attention: their agents' approvals, with Allow
//! and Deny, and where they are told of what waits for them. Forms are
//! guarded as every form of the page is (`forms.rs`).

use super::assets::Assets;
use super::forms::{Guarded, from_script, guardable};
use super::views::{Frame, When};
use super::{ASSETS, frame, render};
use crate::model::{
    ApprovalId, ApprovalState, Behavior, DeviceId, GrantId, WebhookFormat, now_millis,
};
use crate::relay::{Caller, RelayError};
use crate::state::AppState;
use crate::wire::{
    ApiError,
    attention::{ApprovalView, ChangeNotifications, Notifications},
    extract::{Path, Query},
};
use askama::Template;
use axum::{
    Extension,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;

/// An approval as the page shows it.
struct ApprovalLine {
    id: i64,
    tool_name: String,
    description: String,
    preview: Option<String>,
    /// The kinds of secret masked in the preview, for the page to name;
    /// empty when none was.
    masked: String,
    /// Why the input is hidden whole: Allow then takes a second step.
    withheld: Option<String>,
    state: &'static str,
    asked: When,
    until: When,
}

#[derive(Template)]
#[template(path = "approvals.html")]
struct ApprovalsPage {
    assets: &'static Assets,
    frame: Frame,
    pending: Vec<ApprovalLine>,
    past: Vec<ApprovalLine>,
    error: Option<String>,
}

/// A device as the page shows it: only its push service.
struct DeviceLine {
    id: i64,
    service: String,
    since: When,
}

/// An OAuth grant, as the settings page lists it.
struct GrantLine {
    id: i64,
    client_name: String,
    redirect_host: String,
    since: When,
}

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    assets: &'static Assets,
    frame: Frame,
    /// The choices of delay: (value, label); `never` is one.
    delays: Vec<(String, String)>,
    after: String,
    at_once_when_away: bool,
    webhook: String,
    webhook_format: String,
    formats: Vec<&'static str>,
    push_key: String,
    devices: Vec<DeviceLine>,
    grants: Vec<GrantLine>,
    saved: bool,
    error: Option<String>,
}

/// `GET /approvals`.
pub(super) async fn approvals(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    render_approvals(&state, &caller, None).await
}

async fn render_approvals(
    state: &AppState,
    caller: &Caller,
    error: Option<String>,
) -> Result<Response, ApiError> {
    let frame = frame(state, caller).await?;
    let now = now_millis();
    let kept = state.relay.approvals(caller, true).await?;
    let (pending, past): (Vec<_>, Vec<_>) = kept
        .iter()
        .map(|a| {
            // What the API shows of it, and the times as the page shows them.
            let view = ApprovalView::new(a, now);
            ApprovalLine {
                id: view.id,
                tool_name: view.tool_name,
                description: view.description,
                preview: view.input_preview,
                masked: view.masked.join(", "),
                withheld: view.withheld,
                state: a.state(now).as_str(),
                asked: When::at(a.created_at),
                until: When::at(a.expires_at),
            }
        })
        .partition(|line| line.state == ApprovalState::Pending.as_str());
    render(move |_| ApprovalsPage {
        assets: &ASSETS,
        frame,
        pending,
        past,
        error,
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(super) struct Answer {
    csrf: String,
    #[serde(default)]
    behavior: String,
    /// The box ticked beside the Allow of an approval whose input is
    /// hidden: "I allow a step whose input I cannot see".
    #[serde(default)]
    input_hidden_ok: Option<String>,
}

/// `POST /approvals/{id}`: the page's Allow or Deny (an Allow of an
/// approval whose input is hidden only with its box ticked).
pub(super) async fn answer(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Guarded(caller, headers, form): Guarded<Answer>,
) -> Result<Response, ApiError> {
    let answered = match Behavior::parse(&form.behavior) {
        Some(behavior) => state
            .relay
            .answer_approval(
                &caller,
                ApprovalId(id),
                behavior,
                form.input_hidden_ok.is_some(),
            )
            .await
            .map(drop),
        None => Err(RelayError::BadInput("answer with Allow or Deny".into())),
    };
    done(&state, &caller, &headers, answered, Page::Approvals).await
}

#[derive(Debug, Deserialize)]
pub(super) struct SettingsQuery {
    #[serde(default)]
    saved: bool,
}

/// `GET /settings`.
pub(super) async fn settings(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<SettingsQuery>,
) -> Result<Response, ApiError> {
    render_settings(&state, &caller, query.saved, None).await
}

async fn render_settings(
    state: &AppState,
    caller: &Caller,
    saved: bool,
    error: Option<String>,
) -> Result<Response, ApiError> {
    let frame = frame(state, caller).await?;
    let shown = Notifications::from(&state.relay.notify_settings(caller).await?);
    let devices = state.relay.devices(caller).await?;
    let grants = state.relay.grants(caller).await?;
    let push_key = state.relay.push_key().await?.public_key_text();
    let after = shown
        .after_seconds
        .map_or_else(|| "never".to_owned(), |s| s.to_string());
    let mut delays: Vec<(String, String)> = [
        ("0", "at once"),
        ("60", "1 minute"),
        ("300", "5 minutes"),
        ("900", "15 minutes"),
        ("3600", "1 hour"),
        ("never", "never"),
    ]
    .into_iter()
    .map(|(value, label)| (value.to_owned(), label.to_owned()))
    .collect();
    if !delays.iter().any(|(value, _)| *value == after) {
        delays.insert(0, (after.clone(), format!("{after} seconds")));
    }
    render(move |_| SettingsPage {
        assets: &ASSETS,
        frame,
        delays,
        after,
        at_once_when_away: shown.at_once_when_away,
        webhook: shown.webhook.unwrap_or_default(),
        webhook_format: shown.webhook_format,
        formats: WebhookFormat::ALL.map(WebhookFormat::as_str).to_vec(),
        push_key,
        devices: devices
            .iter()
            .map(|d| DeviceLine {
                id: d.id.0,
                service: d.service().to_owned(),
                since: When::at(d.created_at),
            })
            .collect(),
        grants: grants
            .iter()
            .map(|g| GrantLine {
                id: g.id.0,
                client_name: g.client_name.clone(),
                redirect_host: url::Url::parse(&g.redirect_uri)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned))
                    .unwrap_or_default(),
                since: When::at(g.created_at),
            })
            .collect(),
        saved,
        error,
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(super) struct SettingsForm {
    csrf: String,
    #[serde(default)]
    after: String,
    #[serde(default)]
    at_once_when_away: Option<String>,
    #[serde(default)]
    webhook: String,
    #[serde(default)]
    webhook_format: String,
}

/// `POST /settings`.
pub(super) async fn save_settings(
    State(state): State<AppState>,
    Guarded(caller, headers, form): Guarded<SettingsForm>,
) -> Result<Response, ApiError> {
    let saved = async {
        let after = match form.after.trim() {
            "never" => None,
            seconds => Some(
                seconds
                    .parse::<u64>()
                    .map_err(|_| RelayError::BadInput("choose when to be told".into()))?,
            ),
        };
        let webhook = form.webhook.trim();
        let change = ChangeNotifications {
            after_seconds: Some(after),
            at_once_when_away: Some(form.at_once_when_away.is_some()),
            webhook: Some((!webhook.is_empty()).then(|| webhook.to_owned())),
            webhook_format: Some(form.webhook_format.clone()).filter(|f| !f.is_empty()),
        };
        let current = state.relay.notify_settings(&caller).await?;
        let settings = change.apply(current)?;
        state
            .relay
            .set_notify_settings(&caller, settings)
            .await
            .map(drop)
    }
    .await;
    done(&state, &caller, &headers, saved, Page::SettingsSaved).await
}

#[derive(Debug, Deserialize)]
pub(super) struct DeviceForm {
    csrf: String,
    endpoint: String,
    p256dh: String,
    auth: String,
}

/// `POST /settings/devices`: "Notify me on this device", sent by the
/// page's script with the browser's subscription.
pub(super) async fn add_device(
    State(state): State<AppState>,
    Guarded(caller, headers, form): Guarded<DeviceForm>,
) -> Result<Response, ApiError> {
    let added = state
        .relay
        .add_device(&caller, &form.endpoint, &form.p256dh, &form.auth)
        .await
        .map(drop);
    done(&state, &caller, &headers, added, Page::Settings).await
}

#[derive(Debug, Deserialize)]
pub(super) struct Plain {
    csrf: String,
}

guardable!(Answer, SettingsForm, DeviceForm, Plain);

/// `POST /settings/devices/{id}/remove`.
pub(super) async fn remove_device(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Guarded(caller, headers, _): Guarded<Plain>,
) -> Result<Response, ApiError> {
    let removed = state.relay.remove_device(&caller, DeviceId(id)).await;
    done(&state, &caller, &headers, removed, Page::Settings).await
}

/// `POST /settings/grants/{id}/revoke`: ends an app's grant.
pub(super) async fn revoke_grant(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Guarded(caller, headers, _): Guarded<Plain>,
) -> Result<Response, ApiError> {
    let ended = state.relay.end_grant(&caller, GrantId(id)).await;
    done(&state, &caller, &headers, ended, Page::Settings).await
}

/// Which page a form of this module answers with.
enum Page {
    Approvals,
    Settings,
    /// The settings, saying they were saved.
    SettingsSaved,
}

impl Page {
    fn path(&self) -> &'static str {
        match self {
            Page::Approvals => "/approvals",
            Page::Settings => "/settings",
            Page::SettingsSaved => "/settings?saved=true",
        }
    }
}

/// A form's answer: on to the `page` (201 with its `Location` for the
/// page's script), or the page again with the reason (for the script, the
/// reason as JSON, as `forms.rs` answers).
async fn done(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    outcome: Result<(), RelayError>,
    page: Page,
) -> Result<Response, ApiError> {
    let next = page.path();
    let error = match outcome {
        Ok(()) if from_script(headers) => {
            return Ok((
                StatusCode::CREATED,
                [(axum::http::header::LOCATION, next.to_owned())],
            )
                .into_response());
        }
        Ok(()) => return Ok(Redirect::to(next).into_response()),
        Err(error) => ApiError::from(error),
    };
    if from_script(headers) {
        let refusal = serde_json::json!({ "refused": error.body()["error"] });
        return Ok(axum::Json(refusal).into_response());
    }
    let status = error.status;
    let mut response = match page {
        Page::Approvals => render_approvals(state, caller, Some(error.message)).await?,
        Page::Settings | Page::SettingsSaved => {
            render_settings(state, caller, false, Some(error.message)).await?
        }
    };
    *response.status_mut() = status;
    Ok(response)
}
