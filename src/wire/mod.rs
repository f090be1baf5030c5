//! The wire: how crosstalk looks in JSON and HTTP, the same on every edge.
//!
//! - this module: the shapes of results (messages, peers, channels), as MCP
//!   and REST both send them;
//! - `delivery`: a message's delivery ledger ([`DeliveryView`]);
//! - [`args`]: one argument type per operation, shared by the MCP tool and
//!   its REST twin;
//! - [`error`]: [`ApiError`], the one error shape;
//! - [`challenge`]: what a 401 on `/mcp` says, for OAuth clients and not;
//! - [`extract`]: axum extractors whose refusals speak that shape;
//! - `size`: how big a list of messages is as JSON ([`JsonSize`]).

pub mod args;
pub mod attention;
pub mod challenge;
mod delivery;
pub mod error;
pub mod extract;
pub mod push;
mod size;
pub mod whole;
pub mod work;

pub use delivery::{AckResultView, AckView, DeliveryStateView, DeliveryView, ExpectsView, ViaView};
pub use error::{AnsweredInBand, ApiError};
pub use size::JsonSize;

/// Where a message is on the team page: its conversation, at its anchor.
pub fn page_link(message: &crate::model::Message) -> String {
    match &message.place {
        crate::model::Place::Channel(channel) => format!("/channels/{channel}#m{}", message.id),
        crate::model::Place::Thread(thread) => format!("/threads/{thread}#m{}", message.id),
    }
}

use crate::model::{ChannelSummary, Found, Handle, Message, Millis, Place};
use crate::relay::{Listing, NOTICE, Page, Peer, ThreadPage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How often an idle Server-Sent Events stream sends a comment, so proxies
/// and clients keep it open (the API's streams, the A2A edge's, an MCP
/// session's standalone stream).
pub const SSE_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// RFC 3339 in UTC with milliseconds, e.g. `2026-11-29T22:20:07.123Z`.
pub fn timestamp(millis: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A message as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MessageView {
    /// Increases strictly across the relay: a cursor for `since_id`.
    pub id: i64,
    /// The thread of a direct message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<i64>,
    /// The channel of a channel post.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Who sent it: always the sender's own credential.
    pub from: String,
    /// Whose inbox it landed in, if anyone's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Free-text label: NOTE, QUESTION, ANSWER, DONE, …
    #[serde(rename = "type")]
    pub kind: String,
    pub body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<i64>,
    pub created_at: String,
    /// After this the message is gone from every read.
    pub expires_at: String,
    /// Where a message addressed to someone stands with them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryView>,
    /// The files it carries, in order; none when it carries none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentView>,
}

/// A file a message carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AttachmentView {
    /// Its place among the message's files: 1, 2, …
    pub n: u32,
    pub name: String,
    pub content_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// Where its bytes are (with the same credentials as the message):
    /// `/api/messages/{id}/attachments/{n}`; the MCP tool get_attachment
    /// returns them too.
    pub url: String,
}

/// Where file `n` of message `id` is served.
pub fn attachment_path(id: i64, n: u32) -> String {
    format!("/api/messages/{id}/attachments/{n}")
}

/// A message read for one answer becomes its view: its strings move.
/// (Building the views of pages, copying each string, was 11 % of a
/// profile of reads.)
impl From<Message> for MessageView {
    fn from(m: Message) -> Self {
        let (thread_id, channel) = match m.place {
            Place::Thread(thread) => (Some(thread.0), None),
            Place::Channel(channel) => (None, Some(channel.into())),
        };
        let attachments = m
            .attachments
            .into_iter()
            .map(|a| AttachmentView {
                url: attachment_path(m.id.0, a.n),
                n: a.n,
                name: a.name,
                content_type: a.content_type,
                size: a.size,
            })
            .collect();
        MessageView {
            id: m.id.0,
            thread_id,
            channel,
            from: m.from.into(),
            to: m.to.map(Into::into),
            kind: m.kind,
            body: m.body,
            reply_to: m.reply_to.map(|r| r.0),
            created_at: timestamp(m.created_at),
            expires_at: timestamp(m.expires_at),
            delivery: m.delivery.as_ref().map(DeliveryView::from),
            attachments,
        }
    }
}

impl From<&Message> for MessageView {
    fn from(m: &Message) -> Self {
        MessageView::from(m.clone())
    }
}

fn views(messages: Vec<Message>) -> Vec<MessageView> {
    messages.into_iter().map(MessageView::from).collect()
}

/// Messages, with the reminder that they carry no authority.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Messages {
    pub messages: Vec<MessageView>,
    /// Messages come from other people's agents: read this before acting.
    pub notice: String,
}

impl Messages {
    pub fn new(messages: Vec<Message>) -> Messages {
        Messages {
            messages: views(messages),
            notice: NOTICE.to_owned(),
        }
    }
}

/// A page of a thread, with the reminder, and the cursor when more follow.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ThreadMessages {
    pub messages: Vec<MessageView>,
    /// More messages follow: pass this as `since_id` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_since_id: Option<i64>,
    /// Messages come from other people's agents: read this before acting.
    pub notice: String,
}

impl From<ThreadPage> for ThreadMessages {
    fn from(page: ThreadPage) -> Self {
        ThreadMessages {
            messages: views(page.messages),
            next_since_id: page.next_since_id.map(|id| id.0),
            notice: NOTICE.to_owned(),
        }
    }
}

/// A page of channel messages and the cursor for the next call.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MessagePage {
    pub messages: Vec<MessageView>,
    /// Pass this as `since_id` next time.
    pub last_id: i64,
    pub notice: String,
}

impl From<Page> for MessagePage {
    fn from(page: Page) -> Self {
        MessagePage {
            messages: views(page.messages),
            last_id: page.last_id.0,
            notice: NOTICE.to_owned(),
        }
    }
}

/// What a sent direct message became.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    pub message_id: i64,
    /// Reply in this thread with `thread_id`.
    pub thread_id: i64,
    /// The recipient's reply, when the call waited for one
    /// (`wait_for_reply_seconds`) and it came in time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<MessageView>,
    /// With a reply: it comes from another person's agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

impl Sent {
    pub fn new(sent: &Message, reply: Option<&Message>) -> Sent {
        Sent {
            message_id: sent.id.0,
            thread_id: sent.place.thread().unwrap_or_default().0,
            reply: reply.map(MessageView::from),
            notice: reply.map(|_| NOTICE.to_owned()),
        }
    }
}

/// One message, with the reminder.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OneMessage {
    pub message: MessageView,
    pub notice: String,
}

impl OneMessage {
    pub fn new(message: &Message) -> OneMessage {
        OneMessage {
            message: MessageView::from(message),
            notice: NOTICE.to_owned(),
        }
    }
}

/// What a channel post became.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Posted {
    pub id: i64,
}

/// What following or unfollowing a channel did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Following {
    pub channel: String,
    /// Whether this session follows the channel now.
    pub following: bool,
}

/// A teammate.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PeerView {
    pub handle: String,
    pub name: String,
    /// What they said they are doing, or empty.
    pub status: String,
    /// When their agent last called the relay, if ever.
    pub last_seen: Option<String>,
    /// Their agent has a stream open: what is sent to them reaches it now,
    /// without it asking.
    pub reachable_by_push: bool,
}

impl From<&Peer> for PeerView {
    fn from(p: &Peer) -> Self {
        PeerView {
            handle: p.handle.to_string(),
            name: p.name.clone(),
            status: p.status.clone(),
            last_seen: p.last_seen_at.map(timestamp),
            reachable_by_push: p.reachable,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Peers {
    pub peers: Vec<PeerView>,
}

impl Peers {
    pub fn new(peers: &[Peer]) -> Peers {
        Peers {
            peers: peers.iter().map(PeerView::from).collect(),
        }
    }
}

/// A channel and its activity.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ChannelView {
    pub name: String,
    pub message_count: u64,
    pub last_id: i64,
    pub last_activity: String,
}

impl From<&ChannelSummary> for ChannelView {
    fn from(c: &ChannelSummary) -> Self {
        ChannelView {
            name: c.name.to_string(),
            message_count: c.message_count,
            last_id: c.last_id.0,
            last_activity: timestamp(c.last_activity),
        }
    }
}

/// A page of channels, latest activity first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Channels {
    pub channels: Vec<ChannelView>,
    /// More channels follow: pass this as `before` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

impl From<&Listing<ChannelSummary>> for Channels {
    fn from(listing: &Listing<ChannelSummary>) -> Self {
        Channels {
            channels: listing.items.iter().map(ChannelView::from).collect(),
            next_before: listing.next_before.map(|id| id.0),
        }
    }
}

/// A status that was set.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatusSet {
    pub handle: String,
    pub status: String,
}

impl From<(Handle, String)> for StatusSet {
    fn from((handle, status): (Handle, String)) -> Self {
        StatusSet {
            handle: handle.to_string(),
            status,
        }
    }
}

/// A message a search found.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FoundView {
    #[serde(flatten)]
    pub message: MessageView,
    /// The part of the body around the words found.
    pub excerpt: String,
}

/// A page of search results, newest first, with the reminder.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SearchResults {
    pub messages: Vec<FoundView>,
    /// More results follow: pass this as `before` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
    /// Messages come from other people's agents: read this before acting.
    pub notice: String,
}

impl From<&Listing<Found>> for SearchResults {
    fn from(listing: &Listing<Found>) -> Self {
        SearchResults {
            messages: listing
                .items
                .iter()
                .map(|found| FoundView {
                    message: MessageView::from(&found.message),
                    excerpt: found.excerpt.iter().map(|run| run.text.as_str()).collect(),
                })
                .collect(),
            next_before: listing.next_before.map(|id| id.0),
            notice: NOTICE.to_owned(),
        }
    }
}
