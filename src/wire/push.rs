//! What a push looks like to an agent: Claude Code's channel notification,
//! `notifications/claude/channel`, whose `content` it shows the model and
//! whose `meta` become the attributes of a `<channel …>` tag. Meta keys are
//! letters, digits and underscores only (others may be dropped), and every
//! value is a string.

use super::MessageView;
use crate::relay::Push;
use serde_json::{Map, Value, json};

/// The notification's method.
pub const CHANNEL_NOTIFICATION: &str = "notifications/claude/channel";

/// The `params` of the notification for `message`.
pub fn channel_params(message: &MessageView) -> Value {
    let mut meta = Map::new();
    meta.insert("from".into(), message.from.to_string().into());
    meta.insert("type".into(), message.kind.clone().into());
    meta.insert("message_id".into(), message.id.to_string().into());
    if let Some(thread_id) = message.thread_id {
        meta.insert("thread_id".into(), thread_id.to_string().into());
    }
    if let Some(channel) = &message.channel {
        meta.insert("channel".into(), channel.to_string().into());
    }
    if let Some(to) = &message.to {
        meta.insert("to".into(), to.to_string().into());
    }
    json!({ "content": message.body, "meta": meta })
}

/// The whole JSON-RPC notification for a push.
pub fn channel_notification(push: &Push) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": CHANNEL_NOTIFICATION,
        "params": channel_params(&MessageView::from(push.message())),
    })
}

/// The notification as one server-sent event.
pub fn channel_event(push: &Push) -> String {
    format!("data: {}\n\n", channel_notification(push))
}
