//! Which database a command works on: the SQLite file (`RELAY_DB`), or
//! PostgreSQL when `RELAY_DATABASE_URL` is set; and a failure to use it
//! said in terms of those variables, with what to do.

use super::StartError;
use crate::config::Database;
use crate::relay::Team;
use crate::store::{PostgresStore, SqliteStore, Store, StoreError, migrate, sqlite};
use std::{path::Path, sync::Arc};

/// Opens the store `database` names. Only a command that changes the team
/// (or serves) may create a SQLite database; PostgreSQL's schema is made
/// by whichever connects first.
pub async fn open_store(
    database: &Database,
    may_create: bool,
) -> Result<Arc<dyn Store>, StartError> {
    let db = &database.db;
    if let Some(url) = &database.database_url {
        let store = PostgresStore::connect(url.expose())
            .await
            .map_err(postgres_error)?;
        return Ok(Arc::new(store));
    }
    let store = if may_create {
        SqliteStore::open_with(db, database.sqlite_sync)
    } else {
        SqliteStore::open_existing(db)
    };
    Ok(Arc::new(store.map_err(|e| database_error(db, e))?))
}

/// The team in `database`, for the commands that manage it while a relay
/// may be serving it.
pub async fn open_team(database: &Database, may_create: bool) -> Result<Team, StartError> {
    let store = open_store(database, may_create).await?;
    Ok(Team::new(store))
}

/// A PostgreSQL failure, naming `RELAY_DATABASE_URL` (never its value).
pub(super) fn postgres_error(source: StoreError) -> StartError {
    StartError::Postgres {
        hint: "check that the server is up and the URL's host, database, user and password",
        source,
    }
}

/// A database failure, naming `RELAY_DB` and saying what to do.
pub(super) fn database_error(db: &Path, source: StoreError) -> StartError {
    let denied = {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&source);
        let mut denied = false;
        while let Some(error) = cause {
            denied |= error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
                || error.to_string().contains("readonly")
                || error.to_string().contains("permission denied");
            cause = error.source();
        }
        denied
    };
    let hint = match &source {
        _ if denied => {
            "this user may not write there: run as the service's user (sudo crosstalk-admin …), or set RELAY_DB to a file you own"
        }
        StoreError::NotFound(_) => {
            "check RELAY_DB, or --env-file with the service's configuration; a relative path is relative to the working directory"
        }
        StoreError::Conflict(_) => "it is in use",
        StoreError::Backend { .. } | StoreError::Unavailable { .. } => "see the cause",
    };
    StartError::Database {
        path: db.to_owned(),
        hint,
        source,
    }
}

/// `crosstalk migrate-to-postgres`: copies the SQLite relay at `RELAY_DB`
/// into the empty PostgreSQL database at `RELAY_DATABASE_URL`.
pub async fn migrate_to_postgres(database: &Database) -> anyhow::Result<()> {
    let Some(url) = &database.database_url else {
        anyhow::bail!("set RELAY_DATABASE_URL to the (empty) PostgreSQL database to copy into");
    };
    let db = &database.db;
    // No relay may write to the file meanwhile; opening it brings its
    // schema up to date, which the copy reads.
    let _lock = sqlite::lock_for_serving(db).map_err(|e| database_error(db, e))?;
    drop(SqliteStore::open_existing(db).map_err(|e| database_error(db, e))?);
    let store = PostgresStore::connect(url.expose())
        .await
        .map_err(postgres_error)?;
    let copied = migrate::to_postgres(&store, db, crate::model::now_millis())
        .await
        .map_err(|e| anyhow::Error::new(e).context("nothing was copied"))?;
    println!(
        "Copied {copied} from {} into PostgreSQL, and the counts match.\n\
         Start the relays with RELAY_DATABASE_URL set; keep {} as it is, as a backup.",
        db.display(),
        db.display()
    );
    Ok(())
}
