//! What needs a person's attention, in JSON: notification settings and
//! approvals.

use super::timestamp;
use crate::model::{
    Approval, ApprovalState, Behavior, Device, HTTPS_URL_PATTERN, MAX_NOTIFY_AFTER,
    MAX_WEBHOOK_LEN, Millis, NotifySettings, Preview, Webhook, WebhookFormat, WebhookUrl,
};
use crate::relay::{
    AskApproval, MAX_TOOL_NAME_CHARS, RelayError, auth_pattern, line_pattern, p256dh_pattern,
    request_id_pattern,
};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// `GET /api/me/notifications`, and what `PUT` answers: a person's
/// settings as they stand.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Notifications {
    /// Seconds after it was sent that a message your agent has not read is
    /// brought to you; null: never.
    pub after_seconds: Option<u64>,
    /// Told at once when none of your agents listens, instead.
    pub at_once_when_away: bool,
    /// Where notifications are posted, if anywhere.
    pub webhook: Option<String>,
    /// What the webhook is posted: `json`, `ntfy` (a topic URL) or `slack`.
    pub webhook_format: String,
}

impl From<&NotifySettings> for Notifications {
    fn from(settings: &NotifySettings) -> Self {
        Notifications {
            after_seconds: settings.after.map(|ms| (ms / 1000) as u64),
            at_once_when_away: settings.at_once_when_away,
            webhook: settings.webhook.as_ref().map(|w| w.url.as_str().to_owned()),
            webhook_format: settings
                .webhook
                .as_ref()
                .map_or(WebhookFormat::default(), |w| w.format)
                .as_str()
                .to_owned(),
        }
    }
}

/// `PUT /api/me/notifications`: what to change; a field left out stays as
/// it is, `null` turns it off.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeNotifications {
    /// Seconds (0 to 86400); null: never.
    #[serde(default, deserialize_with = "super::whole::present")]
    #[schemars(with = "Option<u64>", range(max = MAX_NOTIFY_AFTER / 1000))]
    pub after_seconds: Option<Option<u64>>,
    pub at_once_when_away: Option<bool>,
    /// An https:// URL; null: none.
    #[serde(default, deserialize_with = "present")]
    #[schemars(
        with = "Option<String>",
        pattern(HTTPS_URL_PATTERN),
        length(max = MAX_WEBHOOK_LEN)
    )]
    pub webhook: Option<Option<String>>,
    /// `json`, `ntfy` or `slack`.
    #[schemars(extend("enum" = ["json", "ntfy", "slack", null]))]
    pub webhook_format: Option<String>,
}

/// A field that is present, even as `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

impl ChangeNotifications {
    /// `current` with these changes, or why they cannot be made.
    pub fn apply(self, current: NotifySettings) -> Result<NotifySettings, RelayError> {
        let mut settings = current;
        if let Some(after) = self.after_seconds {
            settings.after = match after {
                Some(seconds) if seconds > (MAX_NOTIFY_AFTER / 1000) as u64 => {
                    return Err(RelayError::BadInput(format!(
                        "after_seconds: from 0 to {} (a day), or null for never",
                        MAX_NOTIFY_AFTER / 1000
                    )));
                }
                Some(seconds) => Some(seconds as Millis * 1000),
                None => None,
            };
        }
        if let Some(away) = self.at_once_when_away {
            settings.at_once_when_away = away;
        }
        let format = match self.webhook_format.as_deref() {
            Some(named) => Some(WebhookFormat::parse(named).ok_or_else(|| {
                RelayError::BadInput(format!(
                    "webhook_format: one of {}",
                    WebhookFormat::ALL.map(WebhookFormat::as_str).join(", ")
                ))
            })?),
            None => None,
        };
        let format = format
            .or(settings.webhook.as_ref().map(|w| w.format))
            .unwrap_or_default();
        settings.webhook = match self.webhook {
            Some(Some(url)) => Some(Webhook {
                url: WebhookUrl::parse(&url).map_err(|e| RelayError::bad_field("webhook", e))?,
                format,
            }),
            Some(None) => None,
            None => settings.webhook.map(|w| Webhook { format, ..w }),
        };
        Ok(settings)
    }
}

/// `POST /api/approvals`: a step the caller's agent asks them to allow,
/// as Claude Code's `permission_request` carries it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NewApprovalArgs {
    /// The client's id for its prompt (Claude Code's five letters).
    #[schemars(pattern(request_id_pattern()))]
    pub request_id: String,
    /// The tool the step runs, as the person will see it: one line.
    #[schemars(pattern(line_pattern(1, MAX_TOOL_NAME_CHARS)))]
    pub tool_name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub input_preview: String,
}

impl From<NewApprovalArgs> for AskApproval {
    fn from(args: NewApprovalArgs) -> Self {
        AskApproval {
            request_id: args.request_id,
            tool_name: args.tool_name,
            description: args.description,
            input_preview: args.input_preview,
        }
    }
}

/// `POST /api/approvals/{id}` (the path's `id` comes as a field too).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AnswerApproval {
    /// `allow` or `deny`.
    #[schemars(extend("enum" = ["allow", "deny"]))]
    pub behavior: String,
    /// `true` to allow a step whose input is hidden (`withheld` is set):
    /// without it such an allow is refused with 400, so that no single call
    /// allows what its person cannot see. Ignored otherwise.
    #[serde(default)]
    pub input_hidden_ok: bool,
}

impl AnswerApproval {
    /// The answer, as the core takes it.
    pub fn behavior(&self) -> Result<Behavior, RelayError> {
        Behavior::parse(&self.behavior)
            .ok_or_else(|| RelayError::BadInput("behavior: \"allow\" or \"deny\"".into()))
    }
}

/// `answer_approval` (the MCP App's): which approval, and the answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AnswerApprovalArgs {
    /// The approval to answer: one of yours (`list_approvals`).
    #[serde(deserialize_with = "super::whole::required")]
    #[schemars(range(min = 1))]
    pub id: i64,
    #[serde(flatten)]
    pub answer: AnswerApproval,
}

/// An approval as its person sees it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ApprovalView {
    pub id: i64,
    pub request_id: String,
    pub tool_name: String,
    pub description: String,
    /// What the client showed of the step's input, each likely secret in
    /// it replaced by `[withheld: <kind>]`; null when withheld whole.
    pub input_preview: Option<String>,
    /// The kinds of secret masked in `input_preview`, each once.
    #[serde(default)]
    pub masked: Vec<String>,
    /// Why the input is hidden whole, "looks like it contains …": its
    /// secret could not be masked on its own. Allowing it then takes
    /// `input_hidden_ok`.
    pub withheld: Option<String>,
    /// `pending`, `allowed`, `denied` or `expired`.
    pub state: String,
    pub created_at: String,
    pub expires_at: String,
    pub answered_at: Option<String>,
}

impl ApprovalView {
    pub fn new(approval: &Approval, now: Millis) -> Self {
        let (input_preview, masked, withheld) = match &approval.preview {
            Preview::Shown(preview) => (Some(preview.clone()), Vec::new(), None),
            Preview::Masked { text, kinds } => (Some(text.clone()), kinds.clone(), None),
            Preview::Withheld(kind) => (
                None,
                Vec::new(),
                Some(format!("looks like it contains {kind}")),
            ),
        };
        ApprovalView {
            id: approval.id.0,
            request_id: approval.request_id.clone(),
            tool_name: approval.tool_name.clone(),
            description: approval.description.clone(),
            input_preview,
            masked,
            withheld,
            state: approval.state(now).as_str().to_owned(),
            created_at: timestamp(approval.created_at),
            expires_at: timestamp(approval.expires_at),
            answered_at: approval.answer.map(|(_, at)| timestamp(at)),
        }
    }

    pub fn is_pending(&self) -> bool {
        self.state == ApprovalState::Pending.as_str()
    }
}

/// `GET /api/approvals`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Approvals {
    pub approvals: Vec<ApprovalView>,
}

impl Approvals {
    /// The approvals `kept`, as their person sees them at `now`.
    pub fn new(kept: &[Approval], now: Millis) -> Approvals {
        Approvals {
            approvals: kept.iter().map(|a| ApprovalView::new(a, now)).collect(),
        }
    }
}

/// `GET /api/approvals`'s query.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ApprovalsQuery {
    /// Every approval kept (a week's), not only the pending ones.
    #[serde(default)]
    pub all: bool,
}

/// `GET /api/approvals/{id}`'s query.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ApprovalQuery {
    /// Wait up to this many seconds (at most 50) for its answer.
    #[schemars(range(min = 0))]
    pub wait_seconds: Option<f64>,
}

/// `GET /api/push/key`: what a browser subscribes with
/// (`applicationServerKey`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PushKeyView {
    /// The relay's VAPID public key: P-256, uncompressed, base64url.
    pub public_key: String,
}

/// `POST /api/push/subscriptions`: a browser's `PushSubscription`, as its
/// `toJSON()` gives it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NewDevice {
    /// The push service's URL for this browser.
    #[schemars(pattern(HTTPS_URL_PATTERN), length(max = MAX_WEBHOOK_LEN))]
    pub endpoint: String,
    pub keys: DeviceKeys,
    /// Given by some browsers; the push service's answers say when a
    /// subscription ends.
    #[serde(default, rename = "expirationTime")]
    pub expiration_time: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct DeviceKeys {
    /// The browser's P-256 public key, uncompressed, in base64url.
    #[schemars(pattern(p256dh_pattern()))]
    pub p256dh: String,
    /// The browser's 16-byte authentication secret, in base64url.
    #[schemars(pattern(auth_pattern()))]
    pub auth: String,
}

/// A browser a person is notified on: never its endpoint or keys, only
/// its push service.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DeviceView {
    pub id: i64,
    /// The push service's host, e.g. `fcm.googleapis.com`.
    pub service: String,
    pub created_at: String,
}

impl From<&Device> for DeviceView {
    fn from(device: &Device) -> Self {
        DeviceView {
            id: device.id.0,
            service: device.service().to_owned(),
            created_at: timestamp(device.created_at),
        }
    }
}

/// `GET /api/push/subscriptions`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Devices {
    pub subscriptions: Vec<DeviceView>,
}
