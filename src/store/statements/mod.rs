//! Every statement both backends run, written once over an
//! [`Executor`](super::sql::Executor): one function a statement, or a few
//! that always go together (what a purge takes from one conversation, a
//! token's grants ended with it). The rules that weigh what statements
//! find are in `../rules/`; the table of methods (`../methods.rs`) calls
//! both.

pub mod attention;
pub mod inbox;
pub mod messages;
pub mod oauth;
pub mod people;
pub mod purge;
pub mod sessions;
pub mod storing;
pub mod summaries;
pub mod work;
