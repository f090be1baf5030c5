//! Claims on work, written once: of the claims that overlap, only one
//! person's may be live at a time, across every relay sharing the store.

use crate::model::{Claim, Claimed, Millis, NewClaim};
use crate::store::StoreResult;

/// One backend's statements for claims, one statement a method.
pub(in crate::store) trait ClaimStatements {
    /// Holds every other writer of claims off until the transaction ends
    /// (PostgreSQL's table lock; SQLite's writer is alone already).
    async fn lock_claims(&self) -> StoreResult<()>;
    /// The claims in `repo` live at `now`, oldest first.
    async fn live_claims(&self, repo: &str, now: Millis) -> StoreResult<Vec<Claim>>;
    async fn insert_claim(&self, claim: &NewClaim, now: Millis) -> StoreResult<Claim>;
    /// Gives claim `id` a new note and end; the claim as it is now.
    async fn renew_claim(
        &self,
        id: i64,
        note: Option<&str>,
        expires_at: Millis,
    ) -> StoreResult<Claim>;
}

/// Makes `new`, or renews its holder's claim on the same `what` in the
/// same repository; refuses it when another person's live claim overlaps
/// it (their oldest). A holder's own claims never conflict.
pub(in crate::store) async fn claim(
    s: &impl ClaimStatements,
    new: &NewClaim,
    now: Millis,
) -> StoreResult<Claimed> {
    s.lock_claims().await?;
    let live = s.live_claims(&new.repo, now).await?;
    if let Some(taken) = live
        .iter()
        .find(|c| c.holder != new.holder && c.overlaps(&new.target, &new.repo))
    {
        return Ok(Claimed::Taken(taken.clone()));
    }
    let same = live
        .iter()
        .find(|c| c.holder == new.holder && c.what == new.what);
    let claim = match same {
        Some(mine) => {
            s.renew_claim(mine.id, new.note.as_deref(), new.expires_at)
                .await?
        }
        None => s.insert_claim(new, now).await?,
    };
    Ok(Claimed::Made(claim))
}
