//! Delivering what the core decided to tell people ([`Notice`]s) to where
//! each chose: a webhook, in crosstalk's JSON, ntfy's or Slack's.
//!
//! Deliveries run beside each other, at most [`IN_FLIGHT`] at once; while
//! all are busy the core's queue fills and the newest notices are dropped
//! there (logged), so a slow or dead endpoint costs a send nothing. Each
//! is tried [`ATTEMPTS`] times with a growing pause, on a failure to
//! connect, a timeout, 429 or a 5xx; every request goes through
//! [`outbound`]'s checks. A webhook's address is a secret of its owner's
//! (Slack's and ntfy's often are): only its host is ever logged.

pub mod outbound;

use crate::model::{Place, WebhookFormat};
use crate::relay::{About, Notice};
use reqwest::{Client, StatusCode, Url};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// The most deliveries under way at once.
pub const IN_FLIGHT: usize = 16;
/// How many times a delivery is tried.
pub const ATTEMPTS: u32 = 3;
/// The pause before the second try; doubled before each next.
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// Posts notices where their people asked.
#[derive(Clone)]
pub struct Notifier {
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

impl Notifier {
    pub fn new(public_url: &str, allow_private: bool) -> reqwest::Result<Notifier> {
        Ok(Notifier {
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

    async fn deliver(&self, notice: Notice) {
        let Some(webhook) = &notice.webhook else {
            return; // nowhere chosen yet: the page shows it
        };
        let host = webhook.url.host().to_owned();
        let post = match self.post(&notice) {
            Ok(Some(post)) => post,
            Ok(None) => return,
            Err(why) => {
                tracing::warn!(to = %notice.to, %host, "a notification was not sent: {why}");
                return;
            }
        };
        let mut pause = FIRST_RETRY;
        for attempt in 1..=ATTEMPTS {
            let outcome = self
                .client
                .post(post.url.clone())
                .json(&post.body)
                .send()
                .await;
            let retry = match outcome {
                Ok(response) if response.status().is_success() => {
                    tracing::info!(to = %notice.to, %host, "a notification was delivered");
                    return;
                }
                Ok(response) => {
                    let status = response.status();
                    let again = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
                    tracing::warn!(to = %notice.to, %host, %status, attempt, "a webhook refused a notification");
                    again
                }
                Err(error) => {
                    // Without the URL: its path may be the webhook's secret.
                    let error = error.without_url();
                    tracing::warn!(to = %notice.to, %host, attempt, error = &error as &dyn std::error::Error, "a notification could not be posted");
                    !is_refusal(&error)
                }
            };
            if !retry || attempt == ATTEMPTS {
                return;
            }
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }

    /// The request a notice becomes, if it goes anywhere.
    pub fn post(&self, notice: &Notice) -> Result<Option<Post>, String> {
        let Some(webhook) = &notice.webhook else {
            return Ok(None);
        };
        let url = Url::parse(webhook.url.as_str()).map_err(|e| format!("its address: {e}"))?;
        outbound::check_url(&url, self.allow_private).map_err(|e| e.to_string())?;
        let text = self.text(notice);
        Ok(Some(match webhook.format {
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
        }))
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
            } => json!({
                "type": "unread",
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

/// Whether the error is the relay's own refusal of the destination (not
/// worth trying again).
fn is_refusal(error: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause.is::<outbound::Refused>() {
            return true;
        }
        source = cause.source();
    }
    error.is_redirect() || error.is_builder()
}
