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

/// An enum of plain variants and its `ALL`, every variant once in the
/// order declared, made from one list so that neither can miss one:
/// `ALL.len()` is the number of variants, and `variant as usize` indexes
/// an array that long (counters kept by variant).
macro_rules! listed {
    ($(#[$meta:meta])* $vis:vis enum $type:ident {
        $($(#[$variant_meta:meta])* $variant:ident),+ $(,)?
    }) => {
        $(#[$meta])*
        $vis enum $type {
            $($(#[$variant_meta])* $variant),+
        }

        impl $type {
            $vis const ALL: [$type; [$($type::$variant),+].len()] = [$($type::$variant),+];
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
