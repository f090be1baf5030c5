//! crosstalk: a relay that lets a team's coding agents, and the people behind
//! them, message each other across machines.
//!
//! # Bird's-eye view
//! One process, one SQLite file. Requests flow one way:
//!
//! ```text
//! listener ─▶ tower layers (auth) ─▶ edge (mcp, api) ─▶ relay core ─▶ store (SQLite)
//! ```
//!
//! # Where things live
//! - [`config`]: flags and environment, parsed and checked once.
//! - [`app`]: the shared state, the router and its layers, `serve`.
//! - [`auth`]: credentials to a [`relay::Caller`]; binding MCP sessions to people.
//! - [`mcp`]: the MCP tools, thin twins of the core's functions.
//! - [`api`]: JSON wire shapes and the error shape shared by every edge.
//! - [`relay`]: the core — people, messages, inboxes, channels, waits, expiry,
//!   secret refusal. No framework types.
//! - [`store`]: the `Store` interface and its SQLite implementation.
//! - [`cli`], [`demo`]: the commands.
//!
//! # Invariants
//! - The sender of a message always comes from the credential; a person can
//!   never act as another, on any path.
//! - A message is handed out of an inbox once, to one claim.
//! - A waiting call is woken by the commit of a message, never by polling.
//! - An expired message is invisible to every read from the moment it expires.
//! - Tokens exist in the clear only when shown once; logs never carry them.
#![forbid(unsafe_code)]

pub mod api;
pub mod app;

pub mod cli;
pub mod config;
pub mod demo;
pub mod layers;
pub mod mcp;
pub mod relay;
pub mod store;
pub mod tls;
pub mod web;
