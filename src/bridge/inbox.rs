//! The bridge's one push path: the relay's inbox stream, opened again
//! whenever it ends or the follows change, each message passed to Claude
//! Code as a channel notification, once.

use super::{Bridge, FIRST_BACKOFF, MAX_BACKOFF, SHOWN_REMEMBERED};
use crate::model::Channel;
use crate::protocol::CHANNEL_NOTIFICATION;
use crate::wire::{MessageView, push};
use futures::StreamExt;
use rmcp::{
    RoleServer,
    model::{CustomNotification, ServerNotification},
    service::Peer,
};
use serde::Deserialize;
use sse_stream::SseStream;
use std::collections::{BTreeSet, HashSet, VecDeque};
use tokio::sync::watch;

impl Bridge {
    /// Turns the relay's inbox stream into channel notifications to
    /// `client`, opening it again whenever it ends or the follows change,
    /// until the client is gone.
    pub(super) async fn relay_inbox(self, client: Peer<RoleServer>) {
        let http = reqwest::Client::new();
        let mut shown = Shown::default();
        let mut follows = self.follows.subscribe();
        let mut backoff = FIRST_BACKOFF;
        loop {
            let channels: Vec<String> = follows
                .borrow_and_update()
                .iter()
                .map(ToString::to_string)
                .collect();
            // Channel names need no escaping: letters, digits, '.', '_', '-'.
            let url = match channels.is_empty() {
                true => format!("{}/api/inbox/stream?via=channel", self.url),
                false => format!(
                    "{}/api/inbox/stream?via=channel&follow={}",
                    self.url,
                    channels.join(",")
                ),
            };
            let opened = http.get(url).bearer_auth(&self.token).send().await;
            match opened.and_then(reqwest::Response::error_for_status) {
                Ok(response) => {
                    tracing::info!("listening to the relay's inbox stream");
                    backoff = FIRST_BACKOFF;
                    match deliver(response, &client, &mut shown, &mut follows).await {
                        Ended::ClientGone => return,
                        Ended::FollowsChanged => continue, // at once, with the new follows
                        Ended::Stream => {
                            tracing::warn!("the relay's inbox stream ended; reconnecting");
                            // The relay may have restarted: the next tool
                            // call opens a new session. (One a call has just
                            // opened goes too; that costs a reconnect.)
                            *self.relay.lock().await = None;
                        }
                    }
                }
                Err(error) => tracing::warn!(
                    %error,
                    "cannot open the relay's inbox stream; trying again in {backoff:?}"
                ),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// What the bridge has shown Claude Code, the latest few thousand.
#[derive(Default)]
struct Shown {
    ids: HashSet<i64>,
    order: VecDeque<i64>,
}

impl Shown {
    fn contains(&self, id: i64) -> bool {
        self.ids.contains(&id)
    }

    /// Remembers that `id` was written to Claude Code.
    fn remember(&mut self, id: i64) {
        if !self.ids.insert(id) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > SHOWN_REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.ids.remove(&oldest);
        }
    }
}

/// One event of the inbox stream: a message, with how many times it was
/// offered (absent for a followed post).
#[derive(Deserialize)]
struct Pushed {
    #[serde(flatten)]
    message: MessageView,
    offer: Option<u32>,
}

/// Why [`deliver`] stopped.
enum Ended {
    /// The relay's stream ended: open it again after a backoff.
    Stream,
    /// The follows changed: open it again at once, with them.
    FollowsChanged,
    /// Claude Code cannot be written to, or the bridge is ending.
    ClientGone,
}

/// Passes each message of an open inbox stream to `client` as a channel
/// notification, each once, until the stream ends or the follows change.
///
/// Only the wait for the next event gives way to a change of follows: a
/// notification being written is finished and remembered first, so one
/// that reached Claude Code is never shown again when the stream reopens.
async fn deliver(
    response: reqwest::Response,
    client: &Peer<RoleServer>,
    shown: &mut Shown,
    follows: &mut watch::Receiver<BTreeSet<Channel>>,
) -> Ended {
    let mut events = SseStream::from_bytes_stream(response.bytes_stream());
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            changed = follows.changed() => return match changed {
                Ok(()) => Ended::FollowsChanged,
                Err(_) => Ended::ClientGone,
            },
        };
        let Some(Ok(event)) = event else {
            return Ended::Stream;
        };
        let pushed = match (event.event.as_deref(), event.data) {
            (None | Some("message"), Some(data)) => serde_json::from_str::<Pushed>(&data),
            _ => continue, // the notice, a keep-alive
        };
        let Ok(pushed) = pushed else { continue };
        if shown.contains(pushed.message.id) {
            continue;
        }
        let params = push::channel_params(
            &pushed.message,
            pushed.offer.is_some(),
            pushed.offer.unwrap_or(0),
        );
        let notification = CustomNotification::new(CHANNEL_NOTIFICATION, Some(params));
        let sent = client
            .send_notification(ServerNotification::CustomNotification(notification))
            .await;
        if sent.is_err() {
            return Ended::ClientGone;
        }
        shown.remember(pushed.message.id);
    }
}
