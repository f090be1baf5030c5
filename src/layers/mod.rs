//! The tower layers every request passes before it reaches an edge. Their
//! order is set, with reasons, in one place: [`crate::app::router`].
//!
//! Each layer has its own small state and its own error type, and none
//! knows a protocol (what is MCP's, sessions included, is `mcp`'s):
//! - [`edge`]: access log, security headers, request timeout.
//! - [`guard`]: Host (DNS rebinding) and Origin checks.
//! - [`auth`]: credentials to a caller, with the rate limits of [`limits`]
//!   counted against the caller or the [`client`] address.

pub mod auth;
pub mod client;
pub mod edge;
pub mod guard;
pub mod limits;
