//! Coordinating work: acknowledgements, what is owed, and claims
//! (`../rules/claims.rs` decides who holds what).

use super::messages::messages;
use crate::model::{Ack, Claim, Handle, Message, MessageId, Millis, NewClaim};
use crate::store::StoreResult;
use crate::store::columns::{MESSAGE_COLUMNS, OWED, from_row};
use crate::store::sql::{Dialect, Executor, Param, Row};

/// A claim's columns, in [`Claim`]'s order.
macro_rules! claim_columns {
    () => {
        "id, what, repo, holder, note, created_at, expires_at"
    };
}

fn claim_from_row(row: Row<'_>) -> StoreResult<Claim> {
    Ok(from_row!(row.get, Claim: id, what, repo, holder, note, created_at, expires_at))
}

pub async fn ack(db: &impl Executor, to: &Handle, id: MessageId, ack: &Ack) -> StoreResult<bool> {
    let changed = db
        .exec(
            "UPDATE inbox SET ack_result = ?3, ack_note = ?4, acked_at = ?5, \
             read_at = coalesce(read_at, ?5), lease_until = NULL \
             WHERE recipient = ?1 AND message_id = ?2",
            &[to, &id, &ack.result.as_str(), &ack.note, &ack.at],
        )
        .await?;
    Ok(changed > 0)
}

/// Live messages still owed whose `party` (`i.recipient`, or `m.sender`)
/// is `who`, oldest first.
pub async fn owed(
    db: &impl Executor,
    party: &'static str,
    who: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM inbox i JOIN messages m ON m.id = i.message_id \
         WHERE {party} = ?1 AND {OWED} AND m.expires_at > ?2 \
         ORDER BY i.message_id LIMIT ?3"
    );
    messages(db, &sql, &[who, &now, &i64::from(limit)]).await
}

/// The claims live at `now`, in `repo` if named, oldest first.
pub async fn claims(
    db: &impl Executor,
    repo: Option<&str>,
    now: Millis,
) -> StoreResult<Vec<Claim>> {
    let sql = concat!(
        "SELECT ",
        claim_columns!(),
        " FROM claims WHERE expires_at > ?1 AND (CAST(?2 AS TEXT) IS NULL OR repo = ?2) \
         ORDER BY id"
    );
    db.rows(sql, &[&now, &repo], claim_from_row).await
}

pub async fn claim(db: &impl Executor, id: i64, now: Millis) -> StoreResult<Option<Claim>> {
    let sql = concat!(
        "SELECT ",
        claim_columns!(),
        " FROM claims WHERE id = ?1 AND expires_at > ?2"
    );
    db.row(sql, &[&id, &now], claim_from_row).await
}

pub async fn release(db: &impl Executor, id: i64, holder: &Handle) -> StoreResult<bool> {
    let deleted = db
        .exec(
            "DELETE FROM claims WHERE id = ?1 AND holder = ?2",
            &[&id, holder],
        )
        .await?;
    Ok(deleted > 0)
}

pub async fn forget_claims(db: &impl Executor, now: Millis) -> StoreResult<u64> {
    db.exec("DELETE FROM claims WHERE expires_at <= ?1", &[&now])
        .await
}

/// Holds every other writer of claims off until the transaction ends:
/// of two relays claiming overlapping work at once, exactly one wins.
/// SQLite's writer is alone already.
pub async fn lock_claims(db: &impl Executor) -> StoreResult<()> {
    match db.dialect() {
        Dialect::Sqlite => Ok(()),
        Dialect::Postgres => {
            // Run now, never queued behind what it must come before.
            let lock = "LOCK TABLE claims IN SHARE ROW EXCLUSIVE MODE";
            db.exec(lock, &[]).await.map(drop)
        }
    }
}

pub async fn insert_claim(db: &impl Executor, claim: &NewClaim, now: Millis) -> StoreResult<Claim> {
    let sql = concat!(
        "INSERT INTO claims (what, repo, holder, note, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING ",
        claim_columns!()
    );
    let params: [&dyn Param; 6] = [
        &claim.what,
        &claim.repo,
        &claim.holder,
        &claim.note,
        &now,
        &claim.expires_at,
    ];
    db.one(sql, &params, claim_from_row).await
}

/// Gives claim `id` a new note and end; the claim as it is now.
pub async fn renew_claim(
    db: &impl Executor,
    id: i64,
    note: Option<&str>,
    expires_at: Millis,
) -> StoreResult<Claim> {
    let sql = concat!(
        "UPDATE claims SET note = ?2, expires_at = ?3 WHERE id = ?1 RETURNING ",
        claim_columns!()
    );
    db.one(sql, &[&id, &note, &expires_at], claim_from_row)
        .await
}
