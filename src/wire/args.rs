//! One argument type per operation, shared by the MCP tool and its REST
//! twin, so the two can never drift apart. MCP reads them from the tool's
//! arguments; REST from the route's path, query and body together (see
//! [`super::extract`]). The names are public: they are those of the relays
//! crosstalk replaces, so their clients keep working.
//!
//! Defaults are the core's, not these types': an absent field stays `None`
//! all the way to the core, which says what it means.

use crate::relay::{ChannelPost, DirectMessage};
use schemars::JsonSchema;
use serde::Deserialize;

/// `send_message` and `POST /api/messages`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SendMessage {
    /// Handle of the teammate whose agent should receive this.
    pub to: String,
    /// The message text. Never include secrets: they are refused.
    pub body: String,
    /// Reply within this thread; leave out to start a new one.
    pub thread_id: Option<i64>,
    /// A short label such as QUESTION, ANSWER, NOTE (default) or DONE.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Only for the shared relay token: the handle to send as.
    pub sender: Option<String>,
}

impl From<SendMessage> for DirectMessage {
    fn from(m: SendMessage) -> Self {
        DirectMessage {
            sender: m.sender,
            to: m.to,
            body: m.body,
            thread_id: m.thread_id,
            kind: m.kind,
        }
    }
}

/// `check_inbox` and `GET /api/inbox`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CheckInbox {
    /// Seconds to wait for a message when none is waiting: 0 (default) to 50.
    // REST has always called it `timeout_s`, MCP `timeout_seconds`.
    #[serde(alias = "timeout_s")]
    pub timeout_seconds: Option<f64>,
    /// Only for the shared relay token: whose inbox to check.
    pub sender: Option<String>,
}

/// `read_thread` (`GET /api/threads/{id}` takes the id from its path).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadThread {
    /// The thread to read, as returned by send_message or on a message.
    pub thread_id: i64,
}

/// `set_status` and `PUT /api/status`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SetStatus {
    /// One line teammates see next to your name, e.g. "reviewing the auth PR".
    pub status: String,
    /// Only for the shared relay token: whose status to set.
    pub sender: Option<String>,
}

/// `post_message` and `POST /api/channels/{channel}/messages`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct PostMessage {
    /// Channel name: letters, digits, '.', '_' or '-'.
    pub channel: String,
    /// The message text. Never include secrets: they are refused.
    pub body: String,
    /// A short label such as QUESTION, ANSWER, NOTE (default) or DONE.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// A teammate's handle: the post also lands in their inbox.
    pub recipient: Option<String>,
    /// The id of the channel message this answers.
    pub reply_to: Option<i64>,
    /// Must be your own handle if given; only the shared token may name another.
    pub sender: Option<String>,
}

impl From<PostMessage> for ChannelPost {
    fn from(p: PostMessage) -> Self {
        ChannelPost {
            sender: p.sender,
            channel: p.channel,
            body: p.body,
            kind: p.kind,
            recipient: p.recipient,
            reply_to: p.reply_to,
        }
    }
}

/// `get_messages` and `GET /api/channels/{channel}/messages`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetMessages {
    /// Channel name.
    pub channel: String,
    /// Return only messages with a larger id (default 0: from the start).
    pub since_id: Option<i64>,
    /// The most messages to return (default and maximum 500).
    pub limit: Option<u32>,
}

/// `wait_for_message` and `GET /api/channels/{channel}/wait`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WaitForMessage {
    /// Channel name.
    pub channel: String,
    /// Wait for a message with a larger id than this (use the last_id you
    /// have; default 0: any message).
    pub since_id: Option<i64>,
    /// Seconds to wait: 0 to 50 (default 30).
    pub timeout_s: Option<f64>,
}

/// `list_channels` and `GET /api/channels`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ListChannels {
    /// The most channels to list (default 50, at most 200).
    pub limit: Option<u32>,
    /// The next_before of the previous page, for the channels after it.
    pub before: Option<i64>,
}

/// `search_messages` and `GET /api/search`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct SearchMessages {
    /// Words to find in message bodies: every word must match, the last
    /// also as the start of a word. At most 200 characters.
    #[serde(alias = "q")]
    pub query: String,
    /// The most messages to return (default 20, at most 50).
    pub limit: Option<u32>,
    /// The next_before of the previous page, for the older results.
    pub before: Option<i64>,
}
