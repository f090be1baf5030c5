//! `GET /api/channels/{channel}/stream` and `GET /api/threads/{id}/stream`:
//! a conversation as Server-Sent Events; `GET /api/inbox/stream`, an inbox.
//!
//! A `notice` event first, then every message the core's
//! [`Feed`](crate::relay::Feed) yields: the backlog after the
//! cursor, then each message as it is committed. Every event's `id:` is the
//! message id, so a client that reconnects with `Last-Event-ID` resumes
//! exactly where it stopped. The stream ends when the client goes away or
//! the relay shuts down.

use crate::model::{CHANNEL_PATTERN, HANDLE_PATTERN, Message, MessageId, ThreadId, Via};
use crate::relay::{Caller, Feed, MAX_FOLLOWS, NOTICE, Push, Update};
use crate::state::AppState;
use crate::wire::{
    ApiError, DeliveryView, MessageView,
    extract::{Path, Query},
};
use axum::{
    Extension,
    extract::State,
    http::HeaderMap,
    response::sse::{Event, KeepAlive, Sse},
};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use std::convert::Infallible;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StreamQuery {
    /// Start after this message id (or `Last-Event-ID`); none: from now.
    since_id: Option<i64>,
}

pub async fn channel_stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let since = resume_from(&headers).or(query.since_id);
    Ok(events(state.relay.channel_feed(
        &caller,
        &channel,
        since.map(MessageId),
    )?))
}

pub async fn thread_stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let since = resume_from(&headers).or(query.since_id);
    Ok(events(
        state
            .relay
            .thread_feed(&caller, ThreadId(id), since.map(MessageId))
            .await?,
    ))
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct InboxStreamQuery {
    /// Whose inbox, for the shared token.
    #[schemars(pattern(HANDLE_PATTERN))]
    sender: Option<String>,
    /// Channels whose new posts the stream also carries, comma-separated.
    #[schemars(pattern(follow_pattern()))]
    follow: Option<String>,
    /// How the client shows what it is offered: `channel` (it turns each
    /// into a Claude Code channel event: the bridge) or `stream` (the
    /// default), as the ledger's `delivery.via` names it.
    via: Option<StreamVia>,
}

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum StreamVia {
    Channel,
    Stream,
}

/// `follow`'s rule as a regular expression, for the API's document: up to
/// [`MAX_FOLLOWS`] channel names between commas (empty ones skipped).
fn follow_pattern() -> String {
    let channel = CHANNEL_PATTERN
        .trim_start_matches('^')
        .trim_end_matches('$');
    format!(
        "^,*(?:{channel}(?:,+{channel}){{0,{}}})?,*$",
        MAX_FOLLOWS - 1
    )
}

/// `GET /api/inbox/stream`: the caller's inbox as it fills, each message
/// offered to the stream as it is sent: a push, leased to this stream (see
/// `relay/push.rs`), with `offer` (1, 2, …) in the event's JSON beside the
/// message's fields. What waits is sent first, oldest first. When the
/// client goes away, what it was offered and has not confirmed (read or
/// answered) is offered again elsewhere at once; a reconnecting client
/// needs no `Last-Event-ID`. `?follow=a,b` adds the new posts of those
/// channels, as copies (never leased, no `offer`).
pub async fn inbox_stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<InboxStreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let follows: Vec<String> = query
        .follow
        .iter()
        .flat_map(|list| list.split(','))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    let via = match query.via {
        Some(StreamVia::Channel) => Via::Channel,
        Some(StreamVia::Stream) | None => Via::Stream,
    };
    let feed = state
        .relay
        .inbox_feed(&caller, query.sender.as_deref(), &follows, via)?;
    Ok(sse(
        feed.filter_map(|push| std::future::ready(pushed(&push)))
    ))
}

/// On reconnect, `Last-Event-ID` is newer than the `since_id` of the URL.
fn resume_from(headers: &HeaderMap) -> Option<i64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
}

/// Each new message as a `message` event; a change of where an earlier
/// one stands as a `delivery` event, `{id, delivery}`, with no `id:` (it
/// moves no cursor).
fn events(feed: Feed) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let messages = futures::stream::unfold(feed, |mut feed: Feed| async move {
        let event = match feed.next().await? {
            Update::New(message) => event(message),
            Update::Delivery(message) => {
                let delivery = message.delivery.as_ref().map(DeliveryView::from);
                let data = serde_json::json!({ "id": message.id.0, "delivery": delivery });
                Event::default().event("delivery").data(data.to_string())
            }
        };
        Some((event, feed))
    });
    sse(messages)
}

/// A `notice` event, then `messages`, kept alive while idle.
fn sse(
    messages: impl Stream<Item = Event> + Send + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let notice = serde_json::json!({ "notice": NOTICE }).to_string();
    let greeting = Event::default().event("notice").data(notice);
    let events = futures::stream::once(async { greeting })
        .chain(messages)
        .map(Ok);
    Sse::new(events).keep_alive(KeepAlive::new().interval(crate::wire::SSE_KEEP_ALIVE))
}

/// An inbox stream's event: the message, and for a message of the inbox
/// how many times it was offered. (An inbox stream's client is ready from
/// the start: it is never probed.)
fn pushed(push: &Push) -> Option<Event> {
    let message = push.message()?;
    let mut data = view(message);
    if let Push::Inbox(message) = push {
        data["offer"] = message.delivery.as_ref().map_or(1, |d| d.offers).into();
    }
    Some(message_event(message.id.0, data))
}

/// A message as its stream's JSON.
fn view(message: impl Into<MessageView>) -> serde_json::Value {
    serde_json::to_value(message.into()).expect("a message serializes")
}

/// A `message` event: `id:` the message's id, the data as given.
fn message_event(id: i64, data: serde_json::Value) -> Event {
    Event::default()
        .id(id.to_string())
        .event("message")
        .data(data.to_string())
}

fn event(message: Message) -> Event {
    message_event(message.id.0, view(message))
}

/// `GET /api/me/stream`: an `arrived` event for each message addressed to
/// the caller as it commits (`{id, from, first_line, url}`, the url on the
/// team page), for the open page to show as a browser notification.
/// Nothing is claimed: the agent's inbox is untouched.
pub async fn arrivals(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let arrivals = state.relay.arrivals(&caller)?;
    let events = futures::stream::unfold(arrivals, |mut arrivals| async move {
        let message = arrivals.next().await?;
        let data = serde_json::json!({
            "id": message.id.0,
            "from": message.from.as_str(),
            "first_line": crate::relay::first_line(&message.body),
            "url": crate::wire::page_link(&message),
        });
        let event = Event::default()
            .id(message.id.0.to_string())
            .event("arrived")
            .data(data.to_string());
        Some((event, arrivals))
    });
    Ok(sse(events))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_follow_pattern_takes_channels_between_commas() {
        let pattern = regex::Regex::new(&follow_pattern()).unwrap();
        let many = |n: usize| vec!["ops"; n].join(",");
        for (text, ok) in [
            ("", true),
            ("ops", true),
            (",ops,,release-1.2,", true),
            ("ops,-x", false),
            ("ops, release", false),
            (&"c".repeat(65), false),
            (&many(64), true),
        ] {
            assert_eq!(pattern.is_match(text), ok, "{text:?}");
        }
    }
}
