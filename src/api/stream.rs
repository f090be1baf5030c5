//! `GET /api/channels/{channel}/stream`: a channel as Server-Sent Events.
//!
//! The stream subscribes to the channel's wake-ups first, then sends the
//! backlog after the cursor from the store, then each message as it is
//! committed. Every event's `id:` is the message id, so a client that
//! reconnects with `Last-Event-ID` resumes exactly where it stopped. A slow
//! client that falls behind the wake-ups re-reads the store; nothing is lost.
//! The stream ends when the client goes away or the relay shuts down.

use super::extract::{Path, Query};
use super::{ApiError, wire::MessageView};
use crate::app::AppState;
use crate::relay::{Caller, MAX_PAGE, NOTICE, Relay, WaitSlot};
use crate::store::Message;
use axum::{
    Extension,
    extract::State,
    http::HeaderMap,
    response::sse::{Event, KeepAlive, Sse},
};
use futures::Stream;
use serde::Deserialize;
use std::{collections::VecDeque, convert::Infallible, sync::Arc, time::Duration};
use tokio::sync::broadcast::{self, error::RecvError};

/// How often an idle stream sends a comment, so proxies and clients keep it open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Debug, Deserialize)]
pub struct StreamQuery {
    since_id: Option<i64>,
}

pub async fn channel_stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // On reconnect, Last-Event-ID is newer than the since_id of the URL.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let cursor = resume.or(query.since_id).unwrap_or(0);
    let (wake, slot) = state.relay.subscribe_channel(&caller, &channel)?;
    let feed = Feed {
        _slot: slot,
        relay: state.relay.clone(),
        channel,
        cursor,
        wake,
        backlog: VecDeque::new(),
        behind: true,
        greeted: false,
    };
    let events = futures::stream::unfold(feed, |mut feed| async move {
        let event = feed.next_event().await?;
        Some((Ok(event), feed))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// The state of one stream.
struct Feed {
    /// Counts this stream against the caller's and the relay's caps.
    _slot: WaitSlot,
    relay: Arc<Relay>,
    channel: String,
    /// The id of the last message sent (or the cursor asked for).
    cursor: i64,
    /// Wake-ups for the channel, taken before the first read of the store.
    wake: broadcast::Receiver<Arc<Message>>,
    /// Messages read from the store and not yet sent.
    backlog: VecDeque<Message>,
    /// The store may hold messages after `cursor` that are not in `backlog`.
    behind: bool,
    /// Whether the notice went out (it comes first).
    greeted: bool,
}

impl Feed {
    /// The next event, or `None` to end the stream.
    async fn next_event(&mut self) -> Option<Event> {
        if !self.greeted {
            self.greeted = true;
            let notice = serde_json::json!({ "notice": NOTICE }).to_string();
            return Some(Event::default().event("notice").data(notice));
        }
        loop {
            if let Some(message) = self.backlog.pop_front() {
                return Some(self.send(&message));
            }
            if self.behind {
                let page = match self
                    .relay
                    .channel_messages(&self.channel, self.cursor, Some(MAX_PAGE))
                    .await
                {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::error!(%error, channel = %self.channel, "a stream cannot read its channel");
                        return None;
                    }
                };
                self.behind = page.messages.len() as u32 == MAX_PAGE;
                self.backlog.extend(page.messages);
                continue;
            }
            tokio::select! {
                woken = self.wake.recv() => match woken {
                    Ok(message) if message.id > self.cursor => return Some(self.send(&message)),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.behind = true,
                    Err(RecvError::Closed) => return None,
                },
                () = self.relay.shutdown_token().cancelled() => return None,
            }
        }
    }

    fn send(&mut self, message: &Message) -> Event {
        self.cursor = message.id;
        let data =
            serde_json::to_string(&MessageView::from(message)).expect("a message serializes");
        Event::default()
            .id(message.id.to_string())
            .event("message")
            .data(data)
    }
}
