//! The tower layers every request passes before it reaches an edge. Their
//! order is set, with reasons, in one place: [`crate::app::router`].
//!
//! Each layer has its own small state and its own error type, so none of
//! them knows the application around it:
//! - [`edge`]: access log, security headers, request timeout.
//! - [`guard`]: Host (DNS rebinding) and Origin checks.
//! - [`auth`]: credentials to a caller, with the rate limits of [`limits`]
//!   counted against the caller or the [`client`] address.
//! - [`sessions`]: MCP sessions bound to the caller that opened them.

pub mod auth;
pub mod client;
pub mod edge;
pub mod guard;
pub mod limits;
pub mod sessions;
