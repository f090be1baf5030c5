//! Copies of the database: a consistent backup while a relay serves it, and
//! a restore while none does.
//!
//! A serving relay holds an advisory lock on `RELAY_DB.lock` for as long as
//! it runs; a restore takes the same lock first, so it never replaces a
//! database under a running relay (and two relays never serve one file).

use super::{SqliteStore, schema};
use crate::store::{Clash, Missing, StoreError, StoreResult};
use rusqlite::{Connection, OpenFlags};
use std::{
    fs::File,
    path::{Path, PathBuf},
};

/// The lock file beside a database.
fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// An exclusive advisory lock on a database, held while alive.
pub struct ServingLock {
    _file: File,
}

/// Takes the lock that says a relay serves `db`; refused while another
/// holds it.
pub fn lock_for_serving(db: &Path) -> StoreResult<ServingLock> {
    use std::os::unix::fs::OpenOptionsExt;
    super::create_folder(db)?;
    let path = lock_path(db);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::backend(format!("cannot open {}", path.display()), e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
        |_| {
            StoreError::Conflict(Clash::Serving {
                db: db.to_owned(),
                lock: path.clone(),
            })
        },
    )?;
    Ok(ServingLock { _file: file })
}

impl SqliteStore {
    /// Opens a database that must exist already: for commands that only
    /// read, which must never create an empty one by mistake.
    pub fn open_existing(path: &Path) -> StoreResult<SqliteStore> {
        if !path.is_file() {
            return Err(StoreError::NotFound(Missing::Database(path.to_owned())));
        }
        SqliteStore::open(path)
    }
}

/// Copies the database at `db` to `to` (a new file), consistently: the
/// online backup API copies every page in one step, inside one read
/// transaction, so writers carry on and the copy is the database as of one
/// moment.
pub fn backup(db: &Path, to: &Path) -> StoreResult<()> {
    if !db.is_file() {
        return Err(StoreError::NotFound(Missing::Database(db.to_owned())));
    }
    // Made here, new (never through a link, even a dangling one: O_EXCL),
    // and opened without following one: nothing that was at the path, or
    // is put there meanwhile, is written through.
    let exists = || StoreError::Conflict(Clash::Exists(to.to_owned()));
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => exists(),
                _ => StoreError::backend(format!("cannot create {}", to.display()), e),
            })?;
    }
    let copied = copy_into(db, to);
    if copied.is_err() {
        // Nothing half-made is left to refuse the next try.
        let _ = std::fs::remove_file(to);
    }
    copied
}

/// Copies the live database at `db` into the new, empty file `to`.
fn copy_into(db: &Path, to: &Path) -> StoreResult<()> {
    let source = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| StoreError::backend(format!("cannot open {}", db.display()), e))?;
    source.busy_timeout(std::time::Duration::from_secs(5))?;
    let mut copy = Connection::open_with_flags(
        to,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::backend(format!("cannot create {}", to.display()), e))?;
    restrict(to)?;
    copy_all(&source, &mut copy).map_err(|e| StoreError::backend("copying the database", e))?;
    copy.pragma_update(None, "journal_mode", "DELETE")?;
    Ok(())
}

/// Replaces the database at `db` with the copy at `from`, which must be a
/// crosstalk database this version can read. No relay may be serving `db`.
pub fn restore(db: &Path, from: &Path) -> StoreResult<()> {
    let _lock = lock_for_serving(db)?;
    let source = Connection::open_with_flags(from, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| StoreError::backend(format!("cannot open {}", from.display()), e))?;
    let checked: String = source
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(|e| StoreError::backend(format!("{} is not a database", from.display()), e))?;
    let known: bool = source
        .query_row(
            "SELECT count(*) = 1 FROM sqlite_master WHERE type = 'table' AND name = 'messages'",
            [],
            |row| row.get(0),
        )
        .unwrap_or(false);
    if checked != "ok" || !known {
        return Err(StoreError::Conflict(Clash::NotSound {
            path: from.to_owned(),
            checked,
        }));
    }
    // Stale WAL files would be read as part of the new database.
    for stale in ["-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(stale);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
    let mut target = schema::open_connection(db)?;
    restrict(db)?;
    copy_all(&source, &mut target).map_err(|e| StoreError::backend("restoring the database", e))?;
    // Bring an older copy's schema up to this version now, not at the next
    // start.
    schema::migrate(&mut target)?;
    Ok(())
}

/// Copies every page of `source` into `target` in one step of the online
/// backup API: one read transaction, so the copy is of one moment (steps of
/// a few pages would restart whenever a writer commits, and under steady
/// load might never finish). Retries while the source is busy.
fn copy_all(source: &Connection, target: &mut Connection) -> rusqlite::Result<()> {
    use rusqlite::backup::{Backup, StepResult};
    let backup = Backup::new(source, target)?;
    loop {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            StepResult::More | StepResult::Busy | StepResult::Locked => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

fn restrict(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| StoreError::backend(format!("cannot restrict {}", path.display()), e))
}
