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
//! Each module's own header (`//!`) says what it holds; this list of
//! modules is the compiler's, below, and nowhere else by hand.
#![forbid(unsafe_code)]

/// The names an enum of plain variants is stored, sent or labelled by, one
/// a variant: `names!(Via { Channel => "channel", … })` gives `Via::ALL`,
/// `as_str`, and `parse`, which is `None` for a name this build does not
/// know. `as_str` must name every variant, so `ALL` holds each of them:
/// `variant as usize` indexes an array of `ALL.len()` (counters kept by
/// variant).
macro_rules! names {
    ($type:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $type {
            pub const ALL: [$type; [$($name),+].len()] = [$($type::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($type::$variant => $name),+
                }
            }

            pub fn parse(name: &str) -> Option<$type> {
                Self::ALL.into_iter().find(|named| named.as_str() == name)
            }
        }
    };
}

pub mod a2a;
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
