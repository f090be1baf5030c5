//! Claims on work, written once: of the claims that overlap, only one
//! person's may be live at a time, across every relay sharing the store.

use crate::model::{Claimed, Millis, NewClaim};
use crate::store::StoreResult;
use crate::store::sql::Executor;
use crate::store::statements::work;

/// Makes `new`, or renews its holder's claim on the same `what` in the
/// same repository; refuses it when another person's live claim overlaps
/// it (their oldest). A holder's own claims never conflict.
pub(in crate::store) async fn claim(
    db: &impl Executor,
    new: &NewClaim,
    now: Millis,
) -> StoreResult<Claimed> {
    work::lock_claims(db).await?;
    let live = work::claims(db, Some(&new.repo), now).await?;
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
        Some(mine) => work::renew_claim(db, mine.id, new.note.as_deref(), new.expires_at).await?,
        None => work::insert_claim(db, new, now).await?,
    };
    Ok(Claimed::Made(claim))
}
