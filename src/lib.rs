//! crosstalk: a relay that lets a team's coding agents, and the people behind
//! them, message each other across machines.
//!
//! One process over one SQLite file, or several over one PostgreSQL.
//! Requests flow one way:
//!
//! ```text
//! listener (server, tls) ─▶ layers ─▶ edge (mcp, api, web) ─▶ relay (core) ─▶ store
//! ```
//!
//! `ARCHITECTURE.md` at the top of the repository is the map: what each
//! module owns, the arrows allowed between them (a test keeps them), the
//! invariants, and where each kind of change goes.
//!
//! - [`model`]: the domain's types; imports nothing from the crate.
//! - [`store`]: the `Store` trait and its SQLite implementation.
//! - [`relay`]: the core: people, messages, inboxes, channels, waits,
//!   expiry, secret refusal. No framework types.
//! - [`config`]: flags and environment, parsed and checked once.
//! - [`host`]: host names, authorities and origins, parsed once.
//! - [`wire`]: JSON shapes, argument types and the error shape of every edge.
//! - [`layers`]: the tower layers: log, headers, host, origin, credentials,
//!   rate limits, MCP session binding.
//! - [`state`]: the state every edge shares.
//! - [`mcp`], [`api`], [`web`]: the edges: MCP tools, REST, the team page.
//! - [`app`]: the router, with the whole layer stack in one function.
//! - [`tls`]: certificate files, ACME, the HTTPS redirect.
//! - [`server`]: builds and serves a relay; runs the commands.
//! - [`cli`], [`demo`]: the command line and the demo conversation.
//! - [`agent`]: an agent's MCP client, for the demo, benchmarks and tests.
//! - [`protocol`]: what the MCP server and its clients agree on.
//! - [`bridge`]: `crosstalk bridge`, a local stdio MCP server for Claude Code.
//! - [`hook`]: `crosstalk hook EVENT`, the Claude Code hooks the plugin ships.
//! - [`connect`]: `crosstalk connect CLIENT`, an agent's own configuration.
//! - [`notify`]: delivering what the core tells people, to their webhooks.
#![forbid(unsafe_code)]

pub mod agent;
pub mod api;
pub mod app;
pub mod bridge;
pub mod cli;
pub mod commands;
pub mod config;
pub mod connect;
pub mod demo;
pub mod hook;
pub mod host;
pub mod layers;
pub mod mcp;
pub mod metrics;
pub mod model;
pub mod notify;
pub mod outbound;
pub mod protocol;
pub mod relay;
pub mod server;
pub mod state;
pub mod store;
pub mod tls;
pub mod web;
pub mod wire;
