//! Approvals: a step a person's agent asks them to allow (Claude Code's
//! permission prompt, relayed by the bridge), answered from the page, the
//! API or a phone, and carried back to the agent that asked.
//!
//! - Only the person whose agent asked sees it and may answer it. Nobody
//!   may answer for someone else: an approval lets code run on that
//!   person's machine, with their authority, so it is not delegated (a
//!   teammate who should decide can be asked in a message instead).
//! - The first answer wins, and none is taken once it expired
//!   ([`APPROVAL_LIFETIME`]); the terminal's own prompt stays open all the
//!   while, and whichever answer reaches the agent first is the one it
//!   uses.
//! - What the agent's client shows of the step's input, and its
//!   description, pass the secret scanner before they are kept: each likely
//!   secret is masked, and its kind kept, so that the person sees
//!   everything else they are asked to allow (an agent cannot hide a
//!   command behind a key in it). An input whose secret cannot be masked on
//!   its own is withheld whole; allowing it then takes a second, deliberate
//!   step (`input_hidden_ok`), so that nobody allows a step they cannot see
//!   with one click.
//! - Every request and its answer are kept for [`APPROVAL_KEPT`] as the
//!   person's audit trail.

use super::notify::{About, Notice};
use super::quota::Pool;
use super::stats::Event;
use super::{Caller, Relay, RelayError, RelayResult, secrets, text};
use crate::model::{
    Approval, ApprovalId, ApprovalState, Behavior, Millis, NewApproval, Preview, now_millis,
};
use std::time::Duration;

/// How long an approval can be answered.
pub const APPROVAL_LIFETIME: Millis = 10 * 60 * 1000;
/// How long an approval, answered or not, is kept for its person to see.
pub const APPROVAL_KEPT: Millis = 7 * 24 * 60 * 60 * 1000;
/// The most approvals a list returns.
pub const MAX_APPROVALS_LISTED: u32 = 200;
/// How often a wait for an answer looks in the store, for answers given
/// through another relay sharing it (an answer given here wakes it at once).
const WAIT_RECHECK: Duration = Duration::from_secs(2);

const MAX_REQUEST_ID_CHARS: usize = 64;
pub const MAX_TOOL_NAME_CHARS: usize = 200;
const MAX_DESCRIPTION_CHARS: usize = 2_000;
const MAX_PREVIEW_CHARS: usize = 4_000;

/// What an agent's client asks to be allowed.
#[derive(Debug, Clone)]
pub struct AskApproval {
    pub request_id: String,
    pub tool_name: String,
    pub description: String,
    pub input_preview: String,
}

/// The description kept of `description`. This and [`previewed`] keep a
/// client's own texts short and without NULs (which no database's text
/// holds), their likely secrets masked; each is withheld whole only where
/// its secrets cannot be masked on their own. Each is masked for itself: a
/// key in the description hides nothing of the input. Masked whole, then
/// shortened: a secret cut short would no longer be recognised.
fn described(description: &str) -> String {
    match secrets::mask_secrets(description.replace('\0', "").trim()) {
        Ok(masked) => shortened(&masked.text, MAX_DESCRIPTION_CHARS),
        Err(kind) => format!("withheld: looks like it contains {kind}"),
    }
}

/// The preview kept of `input_preview`.
fn previewed(input_preview: &str) -> Preview {
    match secrets::mask_secrets(&input_preview.replace('\0', "")) {
        Ok(masked) if masked.kinds.is_empty() => {
            Preview::Shown(shortened(&masked.text, MAX_PREVIEW_CHARS))
        }
        Ok(masked) => Preview::Masked {
            text: shortened(&masked.text, MAX_PREVIEW_CHARS),
            kinds: masked.kinds.into_iter().map(str::to_owned).collect(),
        },
        Err(kind) => Preview::Withheld(kind.to_owned()),
    }
}

/// At most `max` characters of `text`, marked when cut; never inside a
/// mask's `[withheld: …]`, so what is shown still says what was masked.
fn shortened(text: &str, max: usize) -> String {
    let Some((mut cut, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    if let Some(label) = text[..cut].rfind("[withheld: ")
        && !text[label..cut].contains(']')
    {
        cut = label;
    }
    format!("{}…", &text[..cut])
}

/// A client's id for its request, trimmed: 1 to 64 ASCII letters, digits,
/// '-' or '_'.
fn parse_request_id(raw: &str) -> RelayResult<&str> {
    let request_id = raw.trim();
    if request_id.is_empty()
        || request_id.chars().count() > MAX_REQUEST_ID_CHARS
        || !request_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(RelayError::BadInput(format!(
            "request_id: 1 to {MAX_REQUEST_ID_CHARS} letters, digits, '-' or '_'"
        )));
    }
    Ok(request_id)
}

/// [`parse_request_id`]'s rule as a regular expression, for the API's schemas.
pub fn request_id_pattern() -> String {
    let space = text::WHITESPACE;
    format!("^[{space}]*[A-Za-z0-9_-]{{1,{MAX_REQUEST_ID_CHARS}}}[{space}]*$")
}

impl Relay {
    /// Keeps the caller's agent's request and tells the caller at once.
    pub async fn ask_approval(&self, caller: &Caller, ask: AskApproval) -> RelayResult<Approval> {
        let me = self.person(caller)?.clone();
        let request_id = parse_request_id(&ask.request_id)?;
        let tool_name = ask.tool_name.trim();
        if tool_name.is_empty() {
            return Err(RelayError::bad_field("tool_name", "must not be empty"));
        }
        text::one_line(tool_name, MAX_TOOL_NAME_CHARS, || {
            format!("tool_name: one line of 1 to {MAX_TOOL_NAME_CHARS} characters")
        })?;
        // Masking texts of up to megabytes is the blocking pool's work,
        // not the async workers' (as a long body's scan is).
        let (description, preview) = tokio::task::spawn_blocking(move || {
            (described(&ask.description), previewed(&ask.input_preview))
        })
        .await
        .map_err(|e| RelayError::Internal(Box::new(e)))?;
        let now = now_millis();
        // What is kept counts against its person's daily bytes, in a pool
        // of its own (approvals are kept a week).
        let size =
            request_id.len() + tool_name.len() + description.len() + preview.to_columns().0.len();
        self.quotas.check_bytes(&me, Pool::Approvals, size, now)?;
        let approval = self
            .store
            .add_approval(NewApproval {
                handle: me.clone(),
                request_id: request_id.to_owned(),
                tool_name: tool_name.to_owned(),
                description,
                preview,
                created_at: now,
                expires_at: now + APPROVAL_LIFETIME,
            })
            .await?;
        self.quotas.spend(&me, Pool::Approvals, size, now);
        tracing::info!(%me, id = %approval.id, "an agent asks its person to allow a step");
        self.stats.count(Event::ApprovalAsked);
        self.tell(Notice {
            to: me,
            about: About::Approval {
                id: approval.id,
                tool_name: approval.tool_name.clone(),
                description: approval.description.clone(),
            },
        });
        Ok(approval)
    }

    /// The caller's approvals: those still pending, or (with `all`) every
    /// one kept, newest first.
    pub async fn approvals(&self, caller: &Caller, all: bool) -> RelayResult<Vec<Approval>> {
        let me = self.person(caller)?;
        let now = now_millis();
        let mut kept = self
            .store
            .approvals(me, now - APPROVAL_KEPT, MAX_APPROVALS_LISTED)
            .await?;
        if !all {
            kept.retain(|approval| approval.state(now) == ApprovalState::Pending);
        }
        Ok(kept)
    }

    /// One of the caller's approvals.
    pub async fn approval(&self, caller: &Caller, id: ApprovalId) -> RelayResult<Approval> {
        let me = self.person(caller)?;
        match self.store.approval(id).await? {
            Some(approval) if approval.handle == *me => Ok(approval),
            Some(_) => Err(not_yours(id)),
            None => Err(RelayError::NotFound(format!("there is no approval {id}"))),
        }
    }

    /// Answers one of the caller's pending approvals; the agent that asked
    /// hears of it. Allowing one whose input is withheld takes
    /// `input_hidden_ok`: the person says that they allow a step they
    /// cannot see (the page's second step, the API's flag), so that no
    /// single click or call allows it blind.
    pub async fn answer_approval(
        &self,
        caller: &Caller,
        id: ApprovalId,
        behavior: Behavior,
        input_hidden_ok: bool,
    ) -> RelayResult<Approval> {
        let me = self.person(caller)?;
        let now = now_millis();
        if behavior == Behavior::Allow && !input_hidden_ok {
            let asked = self.approval(caller, id).await?;
            if let (Preview::Withheld(kind), ApprovalState::Pending) =
                (&asked.preview, asked.state(now))
            {
                return Err(hidden_input(id, kind));
            }
        }
        if let Some(answered) = self.store.answer_approval(id, me, behavior, now).await? {
            tracing::info!(%me, %id, behavior = behavior.as_str(), "a person answered their agent");
            self.approvals_answered.publish(&id, ());
            self.stats.count(Event::ApprovalAnswered);
            return Ok(answered);
        }
        // Why not: in the order a person would want to hear it.
        let approval = self.approval(caller, id).await?;
        Err(match approval.answer {
            Some((given, _)) => RelayError::Conflict(format!(
                "approval {id} was answered already ({}): the first answer is the one the \
                 agent gets",
                given.as_str()
            )),
            None => RelayError::Conflict(format!(
                "approval {id} expired: it can be answered for {} minutes; answer it where \
                 the agent runs",
                APPROVAL_LIFETIME / 60_000
            )),
        })
    }

    /// Waits up to `timeout` (at most [`super::MAX_WAIT`]) for one of the
    /// caller's approvals to be answered or to expire; returns it as it
    /// stands then.
    pub async fn wait_approval(
        &self,
        caller: &Caller,
        id: ApprovalId,
        timeout_s: Option<f64>,
    ) -> RelayResult<Approval> {
        let timeout = super::input::parse_wait(timeout_s, Duration::ZERO)?;
        let _slot = self.wait_slot(caller, timeout)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mut answered = self.approvals_answered.subscribe(&id);
            let approval = self.approval(caller, id).await?;
            let now = now_millis();
            if approval.state(now) != ApprovalState::Pending
                || tokio::time::Instant::now() >= deadline
            {
                return Ok(approval);
            }
            let expires = Duration::from_millis(approval.expires_at.saturating_sub(now) as u64);
            let until = deadline.min(tokio::time::Instant::now() + expires.min(WAIT_RECHECK));
            tokio::select! {
                _ = answered.recv() => {}
                () = tokio::time::sleep_until(until) => {}
                () = self.shutdown.cancelled() => return Ok(approval),
            }
        }
    }

    /// Forgets approvals older than [`APPROVAL_KEPT`].
    pub(super) async fn forget_old_approvals(&self) -> RelayResult<u64> {
        Ok(self
            .store
            .forget_approvals(now_millis() - APPROVAL_KEPT)
            .await?)
    }
}

/// Why an Allow of an approval whose input is withheld was not taken.
fn hidden_input(id: ApprovalId, kind: &str) -> RelayError {
    RelayError::BadInput(format!(
        "approval {id}'s input is hidden: it looks like it contains {kind}, so you cannot \
         see what you would allow. Deny it, or answer where the agent runs; to allow it \
         unseen, say so: tick \"I allow a step whose input I cannot see\" on the page, or \
         send \"input_hidden_ok\": true"
    ))
}

fn not_yours(id: ApprovalId) -> RelayError {
    RelayError::Forbidden(format!(
        "approval {id} was asked by another person's agent: only they may see or answer it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{assert_longest, assert_pattern_mirrors};

    #[test]
    fn the_request_id_pattern_says_what_parse_does() {
        let parses = |text: &str| parse_request_id(text).is_ok();
        assert_longest(&request_id_pattern(), parses, MAX_REQUEST_ID_CHARS);
        assert_pattern_mirrors(
            &request_id_pattern(),
            parses,
            &[
                "abc",
                "a-b_C9",
                " abc\n",
                "",
                " ",
                "a b",
                "a.b",
                "ünï",
                "\u{a0}x\u{3000}",
            ],
        );
    }
}
