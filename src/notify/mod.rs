//! Delivering what the core decided to tell people ([`Notice`]s) to where
//! each chose: their webhook (crosstalk's JSON, ntfy's or Slack's) and the
//! browsers they subscribed (Web Push, [`webpush`]).
//!
//! Deliveries run beside each other, at most [`IN_FLIGHT`] at once; while
//! all are busy the core's queue fills and the newest notices are dropped
//! there (logged), so a slow or dead endpoint costs a send nothing. Each
//! request is tried [`ATTEMPTS`] times with a growing pause, on a failure
//! to connect, a timeout, 429 or a 5xx; every one goes through
//! [`outbound`]'s checks. A browser whose push service answers 404 or 410
//! is forgotten. A webhook's address and a push endpoint are secrets of
//! their owner's (Slack's, ntfy's and push services' URLs are
//! capabilities): only their host is ever logged.

pub mod webpush;

use crate::model::{Device, Handle, Place, Webhook, WebhookFormat, now_millis};
use crate::outbound;
use crate::relay::{APPROVAL_LIFETIME, About, Notice, Relay};
use reqwest::{Client, RequestBuilder, StatusCode, Url};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// The most deliveries under way at once.
pub const IN_FLIGHT: usize = 16;
/// How many times a request is tried.
pub const ATTEMPTS: u32 = 3;
/// The pause before the second try; doubled before each next.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// How long a push service keeps a notice about unread messages for a
/// browser that is offline.
const UNREAD_TTL_SECS: i64 = 24 * 60 * 60;

/// Posts notices where their people asked.
#[derive(Clone)]
pub struct Notifier {
    relay: Arc<Relay>,
    client: Client,
    /// The relay's address as people reach it: links point there.
    public_url: String,
    allow_private: bool,
}

/// One request to make: where, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub url: Url,
    pub body: Value,
}

/// How a request ended, after its tries.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    Delivered,
    /// The destination says it is gone for good (404, 410).
    Gone,
    Failed,
}

impl Notifier {
    pub fn new(
        relay: Arc<Relay>,
        public_url: &str,
        allow_private: bool,
    ) -> reqwest::Result<Notifier> {
        Ok(Notifier {
            relay,
            client: outbound::client(allow_private)?,
            public_url: public_url.trim_end_matches('/').to_owned(),
            allow_private,
        })
    }

    /// Delivers notices until the queue closes or the relay stops.
    pub async fn run(self, mut notices: mpsc::Receiver<Notice>, shutdown: CancellationToken) {
        let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
        loop {
            let permit = tokio::select! {
                permit = in_flight.clone().acquire_owned() => permit.expect("never closed"),
                () = shutdown.cancelled() => return,
            };
            let notice = tokio::select! {
                notice = notices.recv() => match notice {
                    Some(notice) => notice,
                    None => return,
                },
                () = shutdown.cancelled() => return,
            };
            let notifier = self.clone();
            tokio::spawn(async move {
                notifier.deliver(notice).await;
                drop(permit);
            });
        }
    }

    /// Delivers one notice everywhere its person asked, side by side.
    async fn deliver(&self, notice: Notice) {
        let (settings, devices) = match tokio::try_join!(
            self.relay.settings_of(&notice.to),
            self.relay.devices_of(&notice.to)
        ) {
            Ok(found) => found,
            Err(error) => {
                tracing::error!(to = %notice.to, error = &error as &dyn std::error::Error, "cannot find where to notify");
                return;
            }
        };
        let webhook = async {
            if let Some(webhook) = &settings.webhook {
                self.to_webhook(&notice, webhook).await;
            }
        };
        let browsers = futures::future::join_all(
            devices
                .iter()
                .map(|device| self.to_browser(&notice, device)),
        );
        tokio::join!(webhook, browsers);
    }

    async fn to_webhook(&self, notice: &Notice, webhook: &Webhook) {
        let host = webhook.url.host();
        let post = match self.post(notice, webhook) {
            Ok(post) => post,
            Err(why) => {
                tracing::warn!(to = %notice.to, %host, "a notification was not sent: {why}");
                return;
            }
        };
        self.send(&notice.to, host, || {
            self.client.post(post.url.clone()).json(&post.body)
        })
        .await;
    }

    async fn to_browser(&self, notice: &Notice, device: &Device) {
        let service = device.service();
        let request = match self.push_request(notice, device).await {
            Ok(request) => request,
            Err(why) => {
                tracing::warn!(to = %notice.to, %service, "a push was not sent: {why}");
                return;
            }
        };
        if self.send(&notice.to, service, request).await == Sent::Gone {
            tracing::info!(to = %notice.to, %service, "the push service no longer knows a browser; forgetting it");
            if let Err(error) = self.relay.forget_device(device.id).await {
                tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "forgetting a browser failed"
                );
            }
        }
    }

    /// The push to `device`, ready to send (again): encrypted and signed.
    async fn push_request(
        &self,
        notice: &Notice,
        device: &Device,
    ) -> Result<impl Fn() -> RequestBuilder + '_, String> {
        let url = crate::host::destination(&device.endpoint, self.allow_private)
            .map_err(|e| format!("its endpoint: {e}"))?;
        let key = self.relay.push_key().await.map_err(|e| e.to_string())?;
        let mut payload = self.push_payload(notice).to_string();
        if payload.len() > webpush::MAX_PAYLOAD {
            // Only the first line can be long; the link still opens it all.
            payload = self.push_payload(&shortened(notice)).to_string();
        }
        let body = webpush::encrypt(device, payload.as_bytes())
            .map_err(|_| "its keys do not make a valid P-256 key agreement".to_owned())?;
        let subject = match self.public_url.starts_with("https://") {
            true => self.public_url.clone(),
            false => "mailto:crosstalk@localhost".to_owned(),
        };
        let now = u64::try_from(now_millis() / 1000).unwrap_or_default();
        let authorization = webpush::authorization(&key, &url, &subject, now)
            .map_err(|_| "signing it failed".to_owned())?;
        let ttl = match notice.about {
            About::Unread { .. } => UNREAD_TTL_SECS,
            About::Approval { .. } => APPROVAL_LIFETIME / 1000,
        };
        Ok(move || {
            self.client
                .post(url.clone())
                .header("TTL", ttl.to_string())
                .header("Urgency", "high")
                .header("Content-Encoding", "aes128gcm")
                .header("Content-Type", "application/octet-stream")
                .header("Authorization", &authorization)
                .body(body.clone())
        })
    }

    /// What the page's service worker shows: a title, a line, where a
    /// click goes, and a tag that makes a newer notice replace an older
    /// one about the same thing.
    fn push_payload(&self, notice: &Notice) -> Value {
        let text = self.text(notice);
        let tag = match &notice.about {
            About::Unread {
                place: Place::Thread(id),
                ..
            } => format!("thread-{id}"),
            About::Unread {
                place: Place::Channel(name),
                ..
            } => format!("channel-{name}"),
            About::Approval { id, .. } => format!("approval-{id}"),
        };
        json!({ "title": text.title, "body": text.message, "url": text.link, "tag": tag })
    }

    /// Sends the request `make` builds, tried again as the module says.
    async fn send(&self, to: &Handle, host: &str, make: impl Fn() -> RequestBuilder) -> Sent {
        let mut pause = FIRST_RETRY;
        for attempt in 1..=ATTEMPTS {
            let again = match make().send().await {
                Ok(response) if response.status().is_success() => {
                    tracing::info!(%to, %host, "a notification was delivered");
                    return Sent::Delivered;
                }
                Ok(response)
                    if matches!(response.status(), StatusCode::NOT_FOUND | StatusCode::GONE) =>
                {
                    tracing::warn!(%to, %host, status = %response.status(), "a notification's destination is gone");
                    return Sent::Gone;
                }
                Ok(response) => {
                    let status = response.status();
                    tracing::warn!(%to, %host, %status, attempt, "a notification was refused");
                    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
                }
                Err(error) => {
                    // Without the URL: its path may be the destination's secret.
                    let error = error.without_url();
                    tracing::warn!(%to, %host, attempt, error = &error as &dyn std::error::Error, "a notification could not be posted");
                    !is_refusal(&error)
                }
            };
            if !again || attempt == ATTEMPTS {
                break;
            }
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
        Sent::Failed
    }

    /// The request a notice becomes for `webhook`.
    pub fn post(&self, notice: &Notice, webhook: &Webhook) -> Result<Post, String> {
        let url = crate::host::destination(webhook.url.as_str(), self.allow_private)
            .map_err(|e| format!("its address: {e}"))?;
        let text = self.text(notice);
        Ok(match webhook.format {
            WebhookFormat::Json => Post {
                url,
                body: self.json(notice),
            },
            WebhookFormat::Ntfy => {
                // JSON publishing goes to the server, the topic in the body.
                let topic = url
                    .path_segments()
                    .and_then(|mut segments| segments.next_back())
                    .filter(|topic| !topic.is_empty())
                    .ok_or("an ntfy address ends with its topic: https://ntfy.sh/TOPIC")?
                    .to_owned();
                let mut server = url.clone();
                server
                    .path_segments_mut()
                    .map_err(|()| "an ntfy address has a path")?
                    .pop();
                Post {
                    url: server,
                    body: json!({
                        "topic": topic,
                        "title": text.title,
                        "message": text.message,
                        "click": text.link,
                        "tags": [text.tag],
                    }),
                }
            }
            WebhookFormat::Slack => Post {
                url,
                body: json!({
                    "text": format!(
                        "*{}*\n{}\n<{}|Open in crosstalk>",
                        slack_escape(&text.title),
                        slack_escape(&text.message),
                        text.link
                    ),
                }),
            },
        })
    }

    /// crosstalk's own shape.
    fn json(&self, notice: &Notice) -> Value {
        let link = self.link(&notice.about);
        match &notice.about {
            About::Unread {
                from,
                place,
                message,
                first_line,
                count,
                overdue,
            } => json!({
                "type": if *overdue { "overdue" } else { "unread" },
                "to": notice.to.as_str(),
                "from": from.as_str(),
                "conversation": conversation(place),
                "message_id": message.0,
                "first_line": first_line,
                "count": count,
                "url": link,
            }),
            About::Approval {
                id,
                tool_name,
                description,
            } => json!({
                "type": "approval",
                "to": notice.to.as_str(),
                "approval_id": id.0,
                "tool_name": tool_name,
                "description": description,
                "url": link,
            }),
        }
    }

    /// A title and a line, for the formats people read as text.
    fn text(&self, notice: &Notice) -> Text {
        let link = self.link(&notice.about);
        match &notice.about {
            About::Unread {
                from,
                first_line,
                count,
                ..
            } => Text {
                title: format!("{from} is waiting for your answer"),
                message: match count {
                    1 => first_line.clone(),
                    n => format!("{first_line} (and {} more)", n - 1),
                },
                link,
                tag: "speech_balloon",
            },
            About::Approval {
                tool_name,
                description,
                ..
            } => Text {
                title: format!("Your agent asks to use {tool_name}"),
                message: description.clone(),
                link,
                tag: "lock",
            },
        }
    }

    /// Where on the team page the notice is about.
    fn link(&self, about: &About) -> String {
        match about {
            About::Unread {
                place: Place::Thread(id),
                ..
            } => format!("{}/threads/{id}", self.public_url),
            About::Unread {
                place: Place::Channel(name),
                ..
            } => format!("{}/channels/{name}", self.public_url),
            About::Approval { .. } => format!("{}/approvals", self.public_url),
        }
    }
}

struct Text {
    title: String,
    message: String,
    link: String,
    tag: &'static str,
}

fn conversation(place: &Place) -> Value {
    match place {
        Place::Thread(id) => json!({ "thread_id": id.0 }),
        Place::Channel(name) => json!({ "channel": name.as_str() }),
    }
}

/// Slack's three control characters, escaped as Slack asks.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The notice with its texts cut short, for a push that would be too long.
fn shortened(notice: &Notice) -> Notice {
    let cut = |text: &mut String| *text = text.chars().take(500).collect();
    let mut short = notice.clone();
    match &mut short.about {
        About::Unread { first_line, .. } => cut(first_line),
        About::Approval {
            tool_name,
            description,
            ..
        } => {
            cut(tool_name);
            cut(description);
        }
    }
    short
}

/// Whether the error is the relay's own refusal of the destination (not
/// worth trying again).
fn is_refusal(error: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause.is::<crate::host::Refused>() {
            return true;
        }
        source = cause.source();
    }
    error.is_redirect() || error.is_builder()
}
