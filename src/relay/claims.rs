//! Claims on work: a person's agent says what it is working on (files by
//! a glob, a branch, a key), so another person's agent does not work on
//! the same thing. Of the claims that overlap, one person's may be live at
//! a time (`store::rules::claim` decides, across relays); a claim ends when
//! its time runs out or its holder releases it.

use super::{Caller, Relay, RelayError, RelayResult, text};
use crate::model::{
    Claim, ClaimTarget, Claimed, DEFAULT_CLAIM_TTL, Glob, MAX_CLAIM_TTL, MAX_CLAIM_WHAT, Millis,
    NewClaim, normalize_repo, now_millis,
};

/// The longest repository name and note, in characters.
pub const MAX_REPO_CHARS: usize = 256;
pub const MAX_CLAIM_NOTE_CHARS: usize = 500;

/// The most live claims one person holds: each new claim is compared with
/// every live one in its repository.
pub const MAX_CLAIMS_PER_PERSON: usize = 64;

/// A claim someone asks for.
#[derive(Debug, Clone, Default)]
pub struct ClaimRequest {
    /// Only for an unbound caller: who claims.
    pub sender: Option<String>,
    pub what: String,
    pub repo: Option<String>,
    pub ttl_seconds: Option<f64>,
    pub note: Option<String>,
}

/// Which claims to list.
#[derive(Debug, Clone, Default)]
pub struct ClaimFilter {
    pub repo: Option<String>,
    /// Only claims covering this path (relative to the repository's root).
    pub path: Option<String>,
    /// Only other people's than the caller's.
    pub others: bool,
}

impl Relay {
    /// Claims work for the caller for `ttl_seconds` (default 30 minutes,
    /// at most a day), or renews their claim on the same `what`; another
    /// person's live claim that overlaps it comes back instead
    /// ([`Claimed::Taken`]).
    pub async fn claim(&self, caller: &Caller, request: ClaimRequest) -> RelayResult<Claimed> {
        let holder = self.acting_as(caller, request.sender.as_deref())?;
        let target = ClaimTarget::parse(&request.what).map_err(RelayError::BadInput)?;
        let repo = parse_repo(request.repo.as_deref())?;
        let ttl = match request.ttl_seconds {
            None => DEFAULT_CLAIM_TTL,
            Some(s) if (1.0..=(MAX_CLAIM_TTL / 1000) as f64).contains(&s) => (s * 1000.0) as Millis,
            Some(s) => {
                return Err(RelayError::BadInput(format!(
                    "ttl_seconds: from 1 to {} (a day); got {s}",
                    MAX_CLAIM_TTL / 1000
                )));
            }
        };
        let note = optional_line(request.note, "note", MAX_CLAIM_NOTE_CHARS)?;
        let now = now_millis();
        let held = self.store.claims(None, now).await?;
        let what = request.what.trim();
        let mine = held.iter().filter(|c| c.holder == holder);
        if mine.clone().count() >= MAX_CLAIMS_PER_PERSON
            && !mine.clone().any(|c| c.what == what && c.repo == repo)
        {
            return Err(RelayError::Conflict(format!(
                "you hold {MAX_CLAIMS_PER_PERSON} live claims, the most one person may: \
                 release some first"
            )));
        }
        let claimed = self
            .store
            .claim(
                NewClaim {
                    what: what.to_owned(),
                    target,
                    repo,
                    holder,
                    note,
                    expires_at: now.saturating_add(ttl),
                },
                now,
            )
            .await?;
        Ok(claimed)
    }

    /// Ends claim `id`; only its holder may.
    pub async fn release_claim(
        &self,
        caller: &Caller,
        sender: Option<&str>,
        id: i64,
    ) -> RelayResult<Claim> {
        let me = self.acting_as(caller, sender)?;
        let claim = self
            .store
            .claim_by_id(id, now_millis())
            .await?
            .ok_or_else(|| RelayError::NotFound(format!("no live claim {id}")))?;
        if claim.holder != me {
            return Err(RelayError::Forbidden(format!(
                "claim {id} is {}'s; only its holder may release it",
                claim.holder
            )));
        }
        if !self.store.release_claim(id, &me).await? {
            return Err(RelayError::NotFound(format!("no live claim {id}")));
        }
        Ok(claim)
    }

    /// The live claims, oldest first, as `filter` narrows them.
    pub async fn claims(&self, caller: &Caller, filter: ClaimFilter) -> RelayResult<Vec<Claim>> {
        let repo = match filter.repo.as_deref() {
            Some(repo) => Some(parse_repo(Some(repo))?),
            None => None,
        };
        let path = match optional_line(filter.path, "path", MAX_CLAIM_WHAT)? {
            Some(path) => Some(
                Glob::parse(&path)
                    .map_err(|e| RelayError::BadInput(e.replacen("what", "path", 1)))?,
            ),
            None => None,
        };
        let me = match filter.others {
            true => Some(self.person(caller)?.clone()),
            false => None,
        };
        let claims = self.store.claims(repo.as_deref(), now_millis()).await?;
        Ok(claims
            .into_iter()
            .filter(|c| me.as_ref() != Some(&c.holder))
            .filter(|c| match &path {
                Some(path) => ClaimTarget::parse(&c.what)
                    .is_ok_and(|t| t.overlaps(&ClaimTarget::Paths(path.clone()))),
                None => true,
            })
            .collect())
    }
}

/// A repository as claims name it (see [`normalize_repo`]); none is `""`.
fn parse_repo(repo: Option<&str>) -> RelayResult<String> {
    let Some(repo) = repo.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(String::new());
    };
    text::one_line(repo, MAX_REPO_CHARS, || {
        format!("repo: one line of at most {MAX_REPO_CHARS} characters, e.g. github.com/org/app")
    })?;
    Ok(normalize_repo(repo))
}

/// An optional one-line text; empty is none.
pub(super) fn optional_line(
    text: Option<String>,
    field: &str,
    max_chars: usize,
) -> RelayResult<Option<String>> {
    let Some(text) = text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    text::one_line(&text, max_chars, || {
        format!("{field}: one line of at most {max_chars} characters")
    })?;
    Ok(Some(text))
}
