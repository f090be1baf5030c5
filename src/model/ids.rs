//! Ids as types, so a message's id is never taken for a thread's, nor a
//! session's for any other text. Messages' and threads' are the store's
//! numbers, shown as they are on the wire.

use std::fmt;

/// A message's id: it increases strictly across the relay and is never
/// reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MessageId(pub i64);

/// A thread's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ThreadId(pub i64);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An MCP session's id, as the relay made it and the client names it in
/// its `Mcp-Session-Id` header.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionId(String);

impl SessionId {
    pub fn new(id: impl Into<String>) -> SessionId {
        SessionId(id.into())
    }

    /// A new session's id: 128 random bits, in a token's lowercase base32,
    /// which no client can guess (a session is still bound to its opener).
    pub fn random() -> SessionId {
        SessionId(super::token::base32(&super::token::random::<16>()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
