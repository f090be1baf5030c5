//! Integration tests: the real server on a spare loopback port, with a
//! temp-dir database, driven by real clients over real sockets.

mod answers;
mod arrows;
mod attention;
mod browser;
mod chrome;
mod claude;
mod cli;
mod connections;
mod contract;
mod conversation;
mod delivery;
mod hardening;
mod identity;
mod inbox;
mod instances;
mod limits;
mod matrix;
mod oauth;
mod operate;
mod page;
mod participants;
mod postgres;
mod prose;
mod push;
mod quotas;
mod rest;
mod restart;
mod rules;
mod schemas;
mod search;
mod secret_corpus;
mod stream;
mod summaries;
mod support;
mod tls;
