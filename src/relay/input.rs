//! What callers give the core, parsed once for every operation: a channel
//! name, a wait in seconds, where a read starts. A leaf of the core: the
//! modules that read, send and wait all use it, and it uses none of them.

use super::{RelayError, RelayResult};
use crate::model::{Channel, MessageId};
use std::time::Duration;

/// The longest any call may wait for a message. Common MCP clients give up on
/// a call after 60 s; 50 leaves room for the answer to arrive.
pub const MAX_WAIT: Duration = Duration::from_secs(50);

/// A channel name from a caller, or a clear refusal.
pub(super) fn parse_channel(name: &str) -> RelayResult<Channel> {
    Channel::parse(name).map_err(|e| RelayError::BadInput(e.to_string()))
}

/// Turns a requested wait in seconds into a duration: negative or not a
/// number is refused, anything above [`MAX_WAIT`] is clamped.
pub(super) fn parse_wait(seconds: Option<f64>, default: Duration) -> RelayResult<Duration> {
    match seconds {
        None => Ok(default.min(MAX_WAIT)),
        Some(s) if s.is_nan() || s < 0.0 => Err(RelayError::BadInput(format!(
            "a timeout is a number of seconds from 0 to {}; got {s}",
            MAX_WAIT.as_secs()
        ))),
        Some(s) => Ok(Duration::from_secs_f64(s.min(MAX_WAIT.as_secs_f64()))),
    }
}

/// Where a read starts: after `since_id`; with none, or a negative one,
/// from the start.
pub(super) fn cursor(since_id: Option<MessageId>) -> MessageId {
    since_id.unwrap_or_default().max(MessageId(0))
}
