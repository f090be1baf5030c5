//! One argument type per operation, shared by the MCP tool and its REST
//! twin, so the two can never drift apart. MCP reads them from the tool's
//! arguments; REST from the route's path, query and body together (see
//! [`super::extract`]). The names are public: they are those of the relays
//! crosstalk replaces, so their clients keep working.
//!
//! Defaults are the core's, not these types': an absent field stays `None`
//! all the way to the core, which says what it means.

use super::{AckResultView, ExpectsView, whole};
use crate::model::{
    CHANNEL_PATTERN, HANDLE_PATTERN, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, MAX_CLAIM_WHAT,
    MessageId, ThreadId,
};
use crate::relay::{
    ChannelPost, ChannelWait, ClaimFilter, ClaimRequest, Content, DirectMessage, InboxCheck,
    MAX_ACK_NOTE_CHARS, MAX_CLAIM_NOTE_CHARS, MAX_FILE_NAME_CHARS, MAX_KIND_CHARS, MAX_REPO_CHARS,
    MAX_STATUS_CHARS, Upload, body_pattern, line_pattern, query_pattern,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// `send_message` and `POST /api/messages`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SendMessage {
    /// Handle of the teammate whose agent should receive this.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub to: String,
    /// The message text. Never include secrets: they are refused.
    #[schemars(pattern(body_pattern()))]
    pub body: String,
    /// Reply within this thread; leave out to start a new one.
    #[serde(default, deserialize_with = "whole::option")]
    #[schemars(range(min = 1))]
    pub thread_id: Option<i64>,
    /// A short label such as QUESTION, ANSWER, NOTE (default) or DONE.
    #[serde(rename = "type")]
    #[schemars(pattern(line_pattern(0, MAX_KIND_CHARS)))]
    pub kind: Option<String>,
    /// Only for the shared relay token: the handle to send as.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
    /// Seconds to wait for the recipient's reply in the thread: 0 (default,
    /// do not wait) to 50. The reply comes back as `reply`; at the timeout
    /// there is none, and it will reach your inbox as usual.
    #[schemars(range(min = 0))]
    pub wait_for_reply_seconds: Option<f64>,
    #[serde(flatten)]
    pub expectation: Expectation,
    /// Files it carries: at most 4, each at most 1 MiB.
    #[schemars(length(max = 4))]
    pub attachments: Option<Vec<AttachmentArg>>,
}

/// The most bytes a message's files take in a request: each at its largest,
/// base64.
pub const MAX_FILES_IN_BODY: usize = MAX_ATTACHMENTS * MAX_ATTACHMENT_BYTES.div_ceil(3) * 4;

/// A file attached to a message.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AttachmentArg {
    /// Its name, e.g. `build.log` or `screenshot.png` (no `/`).
    #[schemars(pattern(line_pattern(1, MAX_FILE_NAME_CHARS)))]
    pub name: String,
    /// Text (`text/plain`, `text/x-diff`, `application/json`, any `text/*`)
    /// or an image (`image/png`, `image/jpeg`, `image/gif`, `image/webp`,
    /// checked by its bytes). Text passes the secret check, as a body does.
    pub content_type: String,
    /// Its bytes, base64 (standard alphabet), at most 1 MiB decoded.
    pub data_base64: String,
}

impl From<AttachmentArg> for Upload {
    fn from(a: AttachmentArg) -> Self {
        Upload {
            name: a.name,
            content_type: a.content_type,
            data_base64: a.data_base64,
        }
    }
}

/// What a message sent by `send_message` or `post_message` carries.
fn content(
    body: String,
    kind: Option<String>,
    expectation: Expectation,
    attachments: Option<Vec<AttachmentArg>>,
) -> Content {
    Content {
        body,
        kind,
        expects: expectation.expects.map(Into::into),
        due_seconds: expectation.due_seconds,
        attachments: attachments
            .unwrap_or_default()
            .into_iter()
            .map(Upload::from)
            .collect(),
    }
}

/// What a message expects of its recipient: `send_message`'s and
/// `post_message`'s fields, and their REST twins'.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct Expectation {
    /// What you expect of the recipient: `reply` (an answer in the thread),
    /// `ack` (an acknowledgement with ack_message) or `none`. A QUESTION
    /// expects a reply unless it says otherwise; other types expect nothing.
    /// What is owed shows in open_questions on both sides.
    pub expects: Option<ExpectsView>,
    /// Seconds the recipient has to answer or acknowledge it (1 to 604800, a
    /// week). Past it, unanswered, it comes back to your inbox as an
    /// OVERDUE item, and the recipient's person is told.
    #[schemars(range(min = 1))]
    pub due_seconds: Option<f64>,
}

impl From<SendMessage> for DirectMessage {
    fn from(m: SendMessage) -> Self {
        DirectMessage {
            sender: m.sender,
            to: m.to,
            thread_id: m.thread_id.map(ThreadId),
            wait_for_reply_seconds: m.wait_for_reply_seconds,
            content: content(m.body, m.kind, m.expectation, m.attachments),
        }
    }
}

/// `check_inbox` and `GET /api/inbox`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CheckInbox {
    /// Seconds to wait for a message when none is waiting: 0 (default) to 50.
    // REST has always called it `timeout_s`, MCP `timeout_seconds`.
    #[serde(alias = "timeout_s")]
    #[schemars(range(min = 0))]
    pub timeout_seconds: Option<f64>,
    /// Only for the shared relay token: whose inbox to check.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
}

impl From<CheckInbox> for InboxCheck {
    fn from(c: CheckInbox) -> Self {
        InboxCheck {
            sender: c.sender,
            timeout_s: c.timeout_seconds,
        }
    }
}

/// `POST /api/inbox/lease`: what a Claude Code hook asks for.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseInbox {
    /// The path the hook shows the messages on: `wake` (it wakes the
    /// session, or comes in between its steps) or `hook` (added to the
    /// prompt the person sent).
    pub via: HookVia,
    /// Seconds to wait for a message when none is waiting: 0 (default) to 50.
    #[schemars(range(min = 0))]
    pub timeout_seconds: Option<f64>,
}

/// The paths a hook shows messages on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HookVia {
    Wake,
    Hook,
}

impl From<HookVia> for crate::model::Via {
    fn from(via: HookVia) -> Self {
        match via {
            HookVia::Wake => crate::model::Via::Wake,
            HookVia::Hook => crate::model::Via::Hook,
        }
    }
}

/// `read_thread`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadThread {
    /// The thread to read, as returned by send_message or on a message.
    #[schemars(range(min = 1))]
    pub thread_id: i64,
    #[serde(flatten)]
    pub page: ThreadPage,
}

/// Which page of a thread: `read_thread`'s, and `GET /api/threads/{id}`'s
/// query.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ThreadPage {
    /// Return only messages with a larger id (default 0: from the start);
    /// a long thread's next page starts after `next_since_id`.
    pub since_id: Option<i64>,
    /// The most messages to return (default and maximum 500).
    #[schemars(range(max = u32::MAX))]
    pub limit: Option<u32>,
}

/// `set_status` and `PUT /api/status`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SetStatus {
    /// One line teammates see next to your name, e.g. "reviewing the auth PR".
    #[schemars(pattern(line_pattern(0, MAX_STATUS_CHARS)))]
    pub status: String,
    /// Only for the shared relay token: whose status to set.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
}

/// `post_message` and `POST /api/channels/{channel}/messages`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct PostMessage {
    /// Channel name: letters, digits, '.', '_' or '-'.
    #[schemars(pattern(CHANNEL_PATTERN))]
    pub channel: String,
    /// The message text. Never include secrets: they are refused.
    #[schemars(pattern(body_pattern()))]
    pub body: String,
    /// A short label such as QUESTION, ANSWER, NOTE (default) or DONE.
    #[serde(rename = "type")]
    #[schemars(pattern(line_pattern(0, MAX_KIND_CHARS)))]
    pub kind: Option<String>,
    /// A teammate's handle: the post also lands in their inbox.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub recipient: Option<String>,
    /// The id of the channel message this answers.
    #[serde(default, deserialize_with = "whole::option")]
    #[schemars(range(min = 1))]
    pub reply_to: Option<i64>,
    /// Must be your own handle if given; only the shared token may name another.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
    /// With a recipient: what the post expects of them.
    #[serde(flatten)]
    pub expectation: Expectation,
    /// Files it carries: at most 4, each at most 1 MiB.
    #[schemars(length(max = 4))]
    pub attachments: Option<Vec<AttachmentArg>>,
}

impl From<PostMessage> for ChannelPost {
    fn from(p: PostMessage) -> Self {
        ChannelPost {
            sender: p.sender,
            channel: p.channel,
            recipient: p.recipient,
            reply_to: p.reply_to.map(MessageId),
            content: content(p.body, p.kind, p.expectation, p.attachments),
        }
    }
}

/// `get_messages` and `GET /api/channels/{channel}/messages`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetMessages {
    /// Channel name.
    #[schemars(pattern(CHANNEL_PATTERN))]
    pub channel: String,
    /// Return only messages with a larger id (default 0: from the start).
    pub since_id: Option<i64>,
    /// The most messages to return (default and maximum 500).
    #[schemars(range(max = u32::MAX))]
    pub limit: Option<u32>,
}

/// `wait_for_message` and `GET /api/channels/{channel}/wait`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WaitForMessage {
    /// Channel name.
    #[schemars(pattern(CHANNEL_PATTERN))]
    pub channel: String,
    /// Wait for a message with a larger id than this (use the last_id you
    /// have; default 0: any message).
    pub since_id: Option<i64>,
    /// Seconds to wait: 0 to 50 (default 30).
    #[schemars(range(min = 0))]
    pub timeout_s: Option<f64>,
}

impl From<WaitForMessage> for ChannelWait {
    fn from(w: WaitForMessage) -> Self {
        ChannelWait {
            channel: w.channel,
            since_id: w.since_id.map(MessageId),
            timeout_s: w.timeout_s,
        }
    }
}

/// `list_channels` and `GET /api/channels`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ListChannels {
    /// The most channels to list (default 50, at most 200).
    #[schemars(range(max = u32::MAX))]
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
    #[schemars(pattern(query_pattern()))]
    pub query: String,
    /// The most messages to return (default 20, at most 50).
    #[schemars(range(max = u32::MAX))]
    pub limit: Option<u32>,
    /// The next_before of the previous page, for the older results.
    pub before: Option<i64>,
}

/// `follow_channel` and `unfollow_channel`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct FollowChannel {
    /// The channel's name.
    #[schemars(pattern(CHANNEL_PATTERN))]
    pub channel: String,
}

/// `ack_message`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AckMessage {
    /// The message to acknowledge: one sent to you.
    #[serde(deserialize_with = "whole::required")]
    #[schemars(range(min = 1))]
    pub message_id: i64,
    #[serde(flatten)]
    pub ack: Acknowledgement,
}

/// An acknowledgement: `ack_message`'s, and the body of `POST
/// /api/messages/{id}/ack`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Acknowledgement {
    /// `done`, `blocked` or `rejected`.
    pub result: AckResultView,
    /// One line the sender reads beside the result, e.g. what blocks you.
    #[schemars(pattern(line_pattern(0, MAX_ACK_NOTE_CHARS)))]
    pub note: Option<String>,
    /// Only for the shared relay token: who acknowledges.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
}

/// `open_questions` and `GET /api/open`; and who releases a claim by
/// `DELETE /api/claims/{id}`: only the shared token names anyone.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct AsPerson {
    /// Only for the shared relay token: whose.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
}

/// `claim` and `POST /api/claims`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Claim {
    /// What you are working on: a path glob from the repository's root
    /// (`src/store/**`, `README.md`), `branch:NAME` or `key:NAME`.
    #[schemars(pattern(line_pattern(1, MAX_CLAIM_WHAT)))]
    pub what: String,
    /// The repository, as its remote names it (`github.com/org/app`, or
    /// the origin URL); leave out for work in no repository.
    #[schemars(pattern(line_pattern(0, MAX_REPO_CHARS)))]
    pub repo: Option<String>,
    /// How long the claim lasts: 1 to 86400 seconds (default 1800). Claim
    /// again to renew it.
    #[schemars(range(min = 1))]
    pub ttl_seconds: Option<f64>,
    /// One line teammates see beside it, e.g. what you are doing.
    #[schemars(pattern(line_pattern(0, MAX_CLAIM_NOTE_CHARS)))]
    pub note: Option<String>,
    /// Only for the shared relay token: who claims.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
}

impl From<Claim> for ClaimRequest {
    fn from(c: Claim) -> Self {
        ClaimRequest {
            sender: c.sender,
            what: c.what,
            repo: c.repo,
            ttl_seconds: c.ttl_seconds,
            note: c.note,
        }
    }
}

/// `release`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Release {
    /// The claim's id, as `claim` returned it.
    #[serde(deserialize_with = "whole::required")]
    #[schemars(range(min = 1))]
    pub claim_id: i64,
    /// Only for the shared relay token: whose claim.
    #[schemars(pattern(HANDLE_PATTERN))]
    pub sender: Option<String>,
}

/// `list_claims` and `GET /api/claims`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ListClaims {
    /// Only the claims in this repository.
    #[schemars(pattern(line_pattern(0, MAX_REPO_CHARS)))]
    pub repo: Option<String>,
    /// Only the claims that cover this path (from the repository's root).
    #[schemars(pattern(line_pattern(0, MAX_CLAIM_WHAT)))]
    pub path: Option<String>,
    /// Only other people's claims than yours.
    #[serde(default)]
    pub others: bool,
}

impl From<ListClaims> for ClaimFilter {
    fn from(l: ListClaims) -> Self {
        ClaimFilter {
            repo: l.repo,
            path: l.path,
            others: l.others,
        }
    }
}

/// `get_attachment`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetAttachment {
    /// The message that carries the file.
    #[serde(deserialize_with = "whole::required")]
    #[schemars(range(min = 1))]
    pub message_id: i64,
    /// The file's `n`, as the message's `attachments` list it (1, 2, …).
    #[serde(deserialize_with = "whole::required")]
    #[schemars(range(min = 1))]
    pub n: u32,
}
