//! Coordinating work (`../sqlite/work.rs`, in PostgreSQL): claims are
//! made under a lock on their table, so of two relays claiming overlapping
//! work at once exactly one wins.

use super::messages::{MESSAGE_COLUMNS, message_from_row};
use super::{Db, Sql, row};
use crate::model::{Ack, Claim, Handle, Message, MessageId, Millis, NewClaim};
use crate::store::columns::OWED;
use crate::store::columns::from_row;
use crate::store::rules::ClaimStatements;
use crate::store::{StoreError, StoreResult};
use tokio_postgres::Row;

const CLAIM_COLUMNS: &str = "id, what, repo, holder, note, created_at, expires_at";

fn claim_from_row(row: &Row) -> StoreResult<Claim> {
    Ok(from_row!(row.try_get, Claim: id, what, repo, holder, note, created_at, expires_at))
}

pub(super) async fn ack(db: &impl Db, to: &Handle, id: MessageId, ack: &Ack) -> StoreResult<bool> {
    let changed = db
        .exec(
            "UPDATE inbox SET ack_result = $3, ack_note = $4, acked_at = $5, \
             read_at = coalesce(read_at, $5), lease_until = NULL \
             WHERE recipient = $1 AND message_id = $2",
            &[&to.as_str(), &id, &ack.result.as_str(), &ack.note, &ack.at],
        )
        .await?;
    Ok(changed > 0)
}

/// Live messages still owed whose `party` (`i.recipient`, or `m.sender`)
/// is `who`, oldest first.
pub(super) async fn owed(
    db: &impl Db,
    party: &'static str,
    who: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let rows = db
        .rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM inbox i JOIN messages m ON m.id = i.message_id \
                 WHERE {party} = $1 AND {OWED} AND m.expires_at > $2 \
                 ORDER BY i.message_id LIMIT $3"
            ),
            &[&who.as_str(), &now, &i64::from(limit)],
        )
        .await?;
    rows.iter().map(message_from_row).collect()
}

pub(super) async fn claims(
    db: &impl Db,
    repo: Option<&str>,
    now: Millis,
) -> StoreResult<Vec<Claim>> {
    let rows = db
        .rows(
            &format!(
                "SELECT {CLAIM_COLUMNS} FROM claims \
                 WHERE expires_at > $1 AND ($2::text IS NULL OR repo = $2) ORDER BY id"
            ),
            &[&now, &repo],
        )
        .await?;
    rows.iter().map(claim_from_row).collect()
}

pub(super) async fn claim(db: &impl Db, id: i64, now: Millis) -> StoreResult<Option<Claim>> {
    row(
        db,
        &format!("SELECT {CLAIM_COLUMNS} FROM claims WHERE id = $1 AND expires_at > $2"),
        &[&id, &now],
    )
    .await?
    .as_ref()
    .map(claim_from_row)
    .transpose()
}

pub(super) async fn release(db: &impl Db, id: i64, holder: &Handle) -> StoreResult<bool> {
    let deleted = db
        .exec(
            "DELETE FROM claims WHERE id = $1 AND holder = $2",
            &[&id, &holder.as_str()],
        )
        .await?;
    Ok(deleted > 0)
}

pub(super) async fn forget_claims(db: &impl Db, now: Millis) -> StoreResult<u64> {
    db.exec("DELETE FROM claims WHERE expires_at <= $1", &[&now])
        .await
}

/// The one row a statement returns, as a claim.
async fn one_claim(
    db: &impl Db,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> StoreResult<Claim> {
    let row = row(db, sql, params)
        .await?
        .ok_or_else(|| StoreError::backend("writing a claim", "no row came back"))?;
    claim_from_row(&row)
}

impl<D: Db> ClaimStatements for Sql<'_, D> {
    async fn lock_claims(&self) -> StoreResult<()> {
        self.0
            .exec("LOCK TABLE claims IN SHARE ROW EXCLUSIVE MODE", &[])
            .await
            .map(drop)
    }

    async fn live_claims(&self, repo: &str, now: Millis) -> StoreResult<Vec<Claim>> {
        claims(self.0, Some(repo), now).await
    }

    async fn insert_claim(&self, claim: &NewClaim, now: Millis) -> StoreResult<Claim> {
        one_claim(
            self.0,
            &format!(
                "INSERT INTO claims (what, repo, holder, note, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING {CLAIM_COLUMNS}"
            ),
            &[
                &claim.what,
                &claim.repo,
                &claim.holder.as_str(),
                &claim.note,
                &now,
                &claim.expires_at,
            ],
        )
        .await
    }

    async fn renew_claim(
        &self,
        id: i64,
        note: Option<&str>,
        expires_at: Millis,
    ) -> StoreResult<Claim> {
        one_claim(
            self.0,
            &format!(
                "UPDATE claims SET note = $2, expires_at = $3 WHERE id = $1 \
                 RETURNING {CLAIM_COLUMNS}"
            ),
            &[&id, &note, &expires_at],
        )
        .await
    }
}
