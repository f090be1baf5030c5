//! Ids as types, so a message's id is never taken for a thread's, nor a
//! session's for any other text. Messages' and threads' are the store's
//! numbers, shown as they are on the wire.

/// A message's id: it increases strictly across the relay and is never
/// reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MessageId(pub i64);

/// A thread's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ThreadId(pub i64);

number_ids!(MessageId, ThreadId);

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
}

text_type!(SessionId);
