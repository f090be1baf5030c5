//! The limits the README and ARCHITECTURE.md state in numbers are the
//! code's: each phrase is read from the document, with the number taken
//! from the constant. (Constants private to a module are checked by that
//! module's own tests.)

use crosstalk::relay::{MAX_OVERVIEW_PAGE, MAX_PAGE, MAX_SEARCH_PAGE, MAX_WAIT};
use crosstalk::store::PURGE_BATCH;

const README: &str = include_str!("../../README.md");
const ARCHITECTURE: &str = include_str!("../../ARCHITECTURE.md");

/// Fails unless `doc` says `phrase`, however its lines are wrapped.
fn says(doc: &str, phrase: &str) {
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(phrase),
        "the document does not say {phrase:?}"
    );
}

#[test]
fn the_documents_state_the_limits_the_code_has() {
    let wait = MAX_WAIT.as_secs();
    says(ARCHITECTURE, &format!("the {wait} s cap"));
    says(ARCHITECTURE, &format!("capped at {wait} s"));
    says(README, &format!("Waits are capped at {wait} s"));
    says(README, &format!("Waits last at most {wait} s"));
    says(
        ARCHITECTURE,
        &format!(
            "({MAX_PAGE} messages, {MAX_OVERVIEW_PAGE} conversations, {MAX_SEARCH_PAGE} results)"
        ),
    );
    says(README, &format!("{PURGE_BATCH} per transaction"));
    says(README, &format!("batches of {PURGE_BATCH} messages"));
}
