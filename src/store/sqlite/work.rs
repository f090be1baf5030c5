//! Coordinating work: acknowledgements, what is owed, and claims
//! (`../rules/claims.rs` decides who holds what).

use super::Sql;
use super::messages::{MESSAGE_COLUMNS, messages_of};
use crate::model::{Ack, Claim, Handle, Message, MessageId, Millis, NewClaim};
use crate::store::StoreResult;
use crate::store::columns::OWED;
use crate::store::columns::from_row;
use crate::store::rules::ClaimStatements;
use rusqlite::{Connection, OptionalExtension, params};

const CLAIM_COLUMNS: &str = "id, what, repo, holder, note, created_at, expires_at";

fn claim_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Claim> {
    Ok(from_row!(row.get, Claim: id, what, repo, holder, note, created_at, expires_at))
}

pub(super) fn ack(conn: &Connection, to: &Handle, id: MessageId, ack: &Ack) -> StoreResult<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE inbox SET ack_result = ?3, ack_note = ?4, acked_at = ?5, \
             read_at = coalesce(read_at, ?5), lease_until = NULL \
             WHERE recipient = ?1 AND message_id = ?2",
        )?
        .execute(params![to, id, ack.result.as_str(), ack.note, ack.at])?;
    Ok(changed > 0)
}

/// Live messages still owed whose `party` (`i.recipient`, or `m.sender`)
/// is `who`, oldest first.
pub(super) fn owed(
    conn: &Connection,
    party: &'static str,
    who: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    messages_of(
        conn,
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM inbox i JOIN messages m ON m.id = i.message_id \
             WHERE {party} = ?1 AND {OWED} AND m.expires_at > ?2 \
             ORDER BY i.message_id LIMIT ?3"
        ),
        params![who, now, limit],
    )
}

pub(super) fn claims(
    conn: &Connection,
    repo: Option<&str>,
    now: Millis,
) -> StoreResult<Vec<Claim>> {
    let sql = format!(
        "SELECT {CLAIM_COLUMNS} FROM claims WHERE expires_at > ?1 AND (?2 IS NULL OR repo = ?2) \
         ORDER BY id"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_map(params![now, repo], claim_from_row)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn claim(conn: &Connection, id: i64, now: Millis) -> StoreResult<Option<Claim>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {CLAIM_COLUMNS} FROM claims WHERE id = ?1 AND expires_at > ?2"
        ))?
        .query_row(params![id, now], claim_from_row)
        .optional()?)
}

pub(super) fn release(conn: &Connection, id: i64, holder: &Handle) -> StoreResult<bool> {
    let deleted = conn
        .prepare_cached("DELETE FROM claims WHERE id = ?1 AND holder = ?2")?
        .execute(params![id, holder])?;
    Ok(deleted > 0)
}

pub(super) fn forget_claims(conn: &Connection, now: Millis) -> StoreResult<u64> {
    let deleted = conn
        .prepare_cached("DELETE FROM claims WHERE expires_at <= ?1")?
        .execute(params![now])?;
    Ok(deleted as u64)
}

impl ClaimStatements for Sql<'_> {
    async fn lock_claims(&self) -> StoreResult<()> {
        Ok(())
    }

    async fn live_claims(&self, repo: &str, now: Millis) -> StoreResult<Vec<Claim>> {
        claims(self.0, Some(repo), now)
    }

    async fn insert_claim(&self, claim: &NewClaim, now: Millis) -> StoreResult<Claim> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "INSERT INTO claims (what, repo, holder, note, created_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING {CLAIM_COLUMNS}"
            ))?
            .query_row(
                params![
                    claim.what,
                    claim.repo,
                    claim.holder,
                    claim.note,
                    now,
                    claim.expires_at
                ],
                claim_from_row,
            )?)
    }

    async fn renew_claim(
        &self,
        id: i64,
        note: Option<&str>,
        expires_at: Millis,
    ) -> StoreResult<Claim> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "UPDATE claims SET note = ?2, expires_at = ?3 WHERE id = ?1 \
                 RETURNING {CLAIM_COLUMNS}"
            ))?
            .query_row(params![id, note, expires_at], claim_from_row)?)
    }
}
