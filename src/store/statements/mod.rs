//! Every statement the store runs, written once for both backends over
//! an [`Executor`](super::sql::Executor): one function a statement (a few
//! run one for each item of a short list), deciding nothing; the rules
//! (`../rules/`) and the table of methods (`../methods.rs`) decide.

pub(super) mod attention;
pub(super) mod inbox;
pub(super) mod messages;
pub(super) mod oauth;
pub(super) mod people;
pub(super) mod purge;
pub(super) mod sessions;
pub(super) mod storing;
pub(super) mod summaries;
pub(super) mod work;
