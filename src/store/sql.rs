//! One way to run SQL on either backend, so that each statement is written
//! once (`statements/`): its text, its parameters and how its rows are
//! read. A backend gives an [`Executor`] (SQLite a connection, PostgreSQL
//! a pooled connection, a transaction or a group commit's batch) and keeps
//! the rest of what it is: connections, writer, schema, listening.
//!
//! - **Text.** A statement is written with SQLite's numbered parameters,
//!   `?1`, `?2`, …; PostgreSQL's executor reads them as `$1`, `$2`, ….
//!   Where the two dialects differ (locking, JSON, arrays, `greatest`),
//!   the statement names one text each ([`Executor::pick`]).
//! - **Parameters** are [`Param`]s: values both drivers can bind. The
//!   model's handles, channels, ids and token hashes are made so here.
//! - **Rows** are read by index through [`Row::get`], into [`Column`]s,
//!   which both drivers can decode. Integers are read at the width
//!   PostgreSQL keeps them (`bigint` as `i64`, `integer` as `i32`); SQLite
//!   reads any width.

use super::{StoreError, StoreResult};
use crate::model::{
    ApprovalId, Channel, DeviceId, GrantId, Handle, MessageId, SessionId, ThreadId, TokenHash,
};
use rusqlite::types::{
    FromSql as SqliteFrom, FromSqlError, FromSqlResult, ToSql as SqliteTo, ToSqlOutput, ValueRef,
};
use std::borrow::Cow;
use tokio_postgres::types::{FromSql as PgFrom, IsNull, ToSql as PgTo, Type};

/// Which SQL an executor speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A value a statement binds, on either backend.
pub trait Param: SqliteTo + PgTo + Sync {}
impl<T: SqliteTo + PgTo + Sync> Param for T {}

/// A value a column is read as, on either backend.
pub trait Column: SqliteFrom + for<'a> PgFrom<'a> {}
impl<T: SqliteFrom + for<'a> PgFrom<'a>> Column for T {}

/// One row of a result, as its backend gives it.
pub enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `index`, decoded; a column that does not hold a `T` is an error.
    pub fn get<T: Column>(&self, index: usize) -> StoreResult<T> {
        match self {
            Row::Sqlite(row) => Ok(row.get(index)?),
            Row::Postgres(row) => Ok(row.try_get(index)?),
        }
    }
}

/// Where statements run: one connection (or transaction) of one backend.
/// Every statement of `statements/` runs over this and nothing else.
pub trait Executor {
    fn dialect(&self) -> Dialect;

    /// Runs a statement that returns no rows: how many rows it changed.
    async fn exec(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<u64>;

    /// Runs a statement, each of its rows read with `read`.
    async fn rows<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        read: impl FnMut(Row<'_>) -> StoreResult<T> + Send,
    ) -> StoreResult<Vec<T>>;

    /// The next message's id, above every id ever given: each backend
    /// keeps its own counter.
    async fn next_message_id(&self) -> StoreResult<MessageId>;

    /// A write whose row count nobody reads. PostgreSQL's group commit
    /// only queues it, to go with the batch's other writes in one round
    /// trip.
    async fn write(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<()> {
        self.exec(sql, params).await.map(drop)
    }

    /// The first row of a statement, if any. Every row is read: give it a
    /// statement that returns one (a key, `LIMIT 1`, `RETURNING`).
    async fn row<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        read: impl FnMut(Row<'_>) -> StoreResult<T> + Send,
    ) -> StoreResult<Option<T>> {
        Ok(self.rows(sql, params, read).await?.into_iter().next())
    }

    /// The one row a statement always returns (`RETURNING` of a write that
    /// cannot miss, a `SELECT` without `FROM`); none is an error, never a
    /// panic.
    async fn one<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        read: impl FnMut(Row<'_>) -> StoreResult<T> + Send,
    ) -> StoreResult<T> {
        let row = self.row(sql, params, read).await?;
        row.ok_or_else(|| StoreError::backend("a statement that returns a row", "none came back"))
    }

    /// Whether a statement returns any row.
    async fn exists(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<bool> {
        Ok(self.row(sql, params, |_| Ok(())).await?.is_some())
    }

    /// The first column of each row, as `T`.
    async fn column<T: Column>(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<Vec<T>> {
        self.rows(sql, params, |row| row.get(0)).await
    }

    /// The first column of the first row, if any.
    async fn value<T: Column>(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<Option<T>> {
        self.row(sql, params, |row| row.get(0)).await
    }

    /// The text of this executor's dialect.
    fn pick<'s>(&self, sqlite: &'s str, postgres: &'s str) -> &'s str {
        match self.dialect() {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }
}

/// A list bound as one parameter: on SQLite a JSON array, read with
/// `json_each(?N)`; on PostgreSQL an array, read with `ANY(?N)` or
/// `unnest` ([`in_list!`] writes the phrase). One statement however long
/// the list, on both.
pub struct List<'a, T>(pub &'a [T]);

impl<T: SqliteTo> SqliteTo for List<'_, T> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        let mut items = Vec::with_capacity(self.0.len());
        for item in self.0 {
            let item = match item.to_sql()? {
                ToSqlOutput::Borrowed(value) => value.into(),
                ToSqlOutput::Owned(value) => value,
                _ => return Err(not_listed()),
            };
            items.push(match item {
                rusqlite::types::Value::Integer(n) => serde_json::Value::from(n),
                rusqlite::types::Value::Text(text) => serde_json::Value::from(text),
                rusqlite::types::Value::Real(x) => serde_json::Value::from(x),
                rusqlite::types::Value::Null => serde_json::Value::Null,
                rusqlite::types::Value::Blob(_) => return Err(not_listed()),
            });
        }
        Ok(ToSqlOutput::from(
            serde_json::Value::Array(items).to_string(),
        ))
    }
}

fn not_listed() -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure("a list holds numbers and text only".into())
}

/// A statement with a [`List`] parameter, in its executor's dialect:
/// `$column IN (SELECT value FROM json_each($n))` on SQLite, `$column =
/// ANY($n)` on PostgreSQL, between the literals `$before` and `$after`.
macro_rules! in_list {
    ($db:expr, $before:literal, $column:literal, $n:literal, $after:literal) => {
        $db.pick(
            concat!(
                $before,
                $column,
                " IN (SELECT value FROM json_each(",
                $n,
                "))",
                $after
            ),
            concat!($before, $column, " = ANY(", $n, ")", $after),
        )
    };
}
pub(crate) use in_list;

impl<T: PgTo + Sync> PgTo for List<'_, T> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        PgTo::to_sql(&self.0, ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <&[T] as PgTo>::accepts(ty)
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<T> std::fmt::Debug for List<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a list of {}", self.0.len())
    }
}

/// A statement's text as PostgreSQL reads it: `?N` as `$N`. A `?` not
/// before a digit (jsonb's `?` operator) stays; one before a digit inside
/// a string literal would be turned too, so no statement writes one.
pub fn dollars(sql: &str) -> Cow<'_, str> {
    let bytes = sql.as_bytes();
    let numbered =
        |at: usize| bytes[at] == b'?' && bytes.get(at + 1).is_some_and(u8::is_ascii_digit);
    if !(0..bytes.len()).any(numbered) {
        return Cow::Borrowed(sql);
    }
    let text: String = sql
        .char_indices()
        .map(|(at, c)| if numbered(at) { '$' } else { c })
        .collect();
    Cow::Owned(text)
}

/// The parameters as PostgreSQL's driver takes them.
pub fn pg_params<'p>(params: &[&'p dyn Param]) -> Vec<&'p (dyn PgTo + Sync)> {
    params
        .iter()
        .map(|param| *param as &(dyn PgTo + Sync))
        .collect()
}

/// Binds `params` to a prepared SQLite statement, in order; a count that
/// does not match the statement's is an error, never a silent null.
pub fn bind_sqlite(
    statement: &mut rusqlite::Statement<'_>,
    params: &[&dyn Param],
) -> StoreResult<()> {
    if statement.parameter_count() != params.len() {
        return Err(StoreError::backend(
            "a statement's parameters",
            format!(
                "it takes {}, {} were given",
                statement.parameter_count(),
                params.len()
            ),
        ));
    }
    for (at, param) in params.iter().enumerate() {
        statement.raw_bind_parameter(at + 1, *param as &dyn SqliteTo)?;
    }
    Ok(())
}

// The model's values, as both backends keep them. Handles and channel
// names are text, parsed on the way out, so a row that does not hold one
// is an error, never a malformed value; ids are the integers they are;
// a token hash is its 32 bytes.

/// Binds `$type` as the `$inner` that `|$value| $as_inner` gives, on both.
macro_rules! bind_as {
    ($($type:ty => $inner:ty, |$value:ident| $as_inner:expr);* $(;)?) => {$(
        impl SqliteTo for $type {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                let $value = self;
                Ok(ToSqlOutput::from($as_inner))
            }
        }

        impl PgTo for $type {
            fn to_sql(
                &self,
                ty: &Type,
                out: &mut bytes::BytesMut,
            ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
                let $value = self;
                PgTo::to_sql(&$as_inner, ty, out)
            }

            fn accepts(ty: &Type) -> bool {
                <$inner as PgTo>::accepts(ty)
            }

            tokio_postgres::types::to_sql_checked!();
        }
    )*};
}
bind_as!(
    Handle => &str, |h| h.as_str();
    Channel => &str, |c| c.as_str();
    SessionId => &str, |s| s.as_str();
    MessageId => i64, |id| id.0;
    ThreadId => i64, |id| id.0;
    GrantId => i64, |id| id.0;
    ApprovalId => i64, |id| id.0;
    DeviceId => i64, |id| id.0;
    TokenHash => &[u8], |hash| &hash.as_bytes()[..];
);

/// Reads `$type` from what its column holds, on both: `$sqlite` from
/// SQLite's value, `$postgres` from PostgreSQL's `$inner`.
macro_rules! read_as {
    ($($type:ty => |$value:ident| $sqlite:expr, $inner:ty, $postgres:expr);* $(;)?) => {$(
        impl SqliteFrom for $type {
            fn column_result($value: ValueRef<'_>) -> FromSqlResult<Self> {
                $sqlite
            }
        }

        impl<'a> PgFrom<'a> for $type {
            fn from_sql(
                ty: &Type,
                raw: &'a [u8],
            ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
                let $value = <$inner as PgFrom>::from_sql(ty, raw)?;
                Ok($postgres)
            }

            fn accepts(ty: &Type) -> bool {
                <$inner as PgFrom>::accepts(ty)
            }
        }
    )*};
}
read_as!(
    Handle => |v| Handle::parse(v.as_str()?).map_err(other), &str, Handle::parse(v)?;
    Channel => |v| Channel::parse(v.as_str()?).map_err(other), &str, Channel::parse(v)?;
    MessageId => |v| i64::column_result(v).map(MessageId), i64, MessageId(v);
    ThreadId => |v| i64::column_result(v).map(ThreadId), i64, ThreadId(v);
    GrantId => |v| i64::column_result(v).map(GrantId), i64, GrantId(v);
    ApprovalId => |v| i64::column_result(v).map(ApprovalId), i64, ApprovalId(v);
    DeviceId => |v| i64::column_result(v).map(DeviceId), i64, DeviceId(v);
    TokenHash => |v| <[u8; 32]>::column_result(v).map(TokenHash::from_bytes),
        &[u8], TokenHash::from_bytes(<[u8; 32]>::try_from(v)?);
);

fn other(error: impl std::error::Error + Send + Sync + 'static) -> FromSqlError {
    FromSqlError::Other(Box::new(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_read_as_dollars_and_nothing_else_changes() {
        assert_eq!(dollars("SELECT 1"), "SELECT 1");
        assert!(matches!(dollars("SELECT 1"), Cow::Borrowed(_)));
        assert_eq!(
            dollars("UPDATE t SET a = ?12 WHERE b = ?1 AND c ? 'k' AND d = '?'"),
            "UPDATE t SET a = $12 WHERE b = $1 AND c ? 'k' AND d = '?'"
        );
    }
}
