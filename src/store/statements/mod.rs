//! Every statement the store runs, written once for both backends over
//! an [`Executor`](super::sql::Executor): one function a statement (a few
//! run one for each item of a short list), deciding nothing; the rules
//! (`../rules/`) and the table of methods (`../methods.rs`) decide.

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
