//! A real PostgreSQL server for the tests: Debian's `postgresql`, started
//! once per test run with `initdb` in a temporary directory, as the
//! unprivileged `postgres` user when the tests run as root (PostgreSQL
//! refuses root), listening on a Unix socket only. Each test gets a
//! database of its own. The server stops, and its directory goes, when the
//! test process ends: the script that started it waits for its standard
//! input to close.
//!
//! The tests that need it are `#[ignore]`d, saying so: `cargo test`
//! reports them as ignored, and `cargo test -- --ignored` (as
//! `.ci/run` does) runs them, failing where PostgreSQL is missing.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{
    OnceLock,
    atomic::{AtomicU32, Ordering},
};

/// The server every test shares.
pub struct Postgres {
    /// Holds the server's socket.
    pub socket_dir: PathBuf,
    bin: PathBuf,
    /// The server's options, to start it again with.
    options: String,
    /// The script that runs the server: it stops the server when its
    /// standard input closes, as this is dropped or the process ends.
    _script: Child,
}

/// The shared server, started on first use.
pub fn server() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(|| start(FOR_TESTS))
}

/// Tests need no durability from the server (a restart is clean), and
/// run many databases at once.
const FOR_TESTS: &str = "-c fsync=off -c max_connections=300";

/// A server of its own, for a test that restarts it; it stops when
/// dropped.
pub fn dedicated() -> Postgres {
    start(FOR_TESTS)
}

/// A server of its own with PostgreSQL's default settings (durable
/// commits), for the benchmarks, plus `settings` (`-c name=value …`).
#[allow(dead_code)] // the benchmarks' only
pub fn durable(settings: &str) -> Option<Postgres> {
    installed().is_some().then(|| start(settings))
}

/// A fresh, empty database's URL on the shared server.
pub async fn fresh_database() -> String {
    server().database().await
}

/// A client of the database at `url`, beside the store under test, for
/// what a test reads or sets up in its tables.
pub async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("the test PostgreSQL server answers");
    tokio::spawn(connection);
    client
}

impl Postgres {
    /// A fresh, empty database's URL.
    pub async fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let server = self;
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        client(&server.url("postgres"))
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("a test database");
        server.url(&name)
    }

    /// The URL of database `name` (over the Unix socket, as `postgres`).
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgresql:///{name}?host={}&port=5432&user=postgres",
            self.socket_dir.display()
        )
    }

    /// Stops the server (`pg_ctl stop -m fast`: clients are disconnected).
    pub fn stop(&self) {
        self.pg_ctl("-m fast -w stop");
    }

    /// Starts the stopped server again on the same data; returns once it
    /// accepts connections.
    pub fn start(&self) {
        self.pg_ctl(&format!(
            "-w -l '{}' -o \"{}\" start",
            self.socket_dir.join("server.log").display(),
            self.options
        ));
    }

    fn pg_ctl(&self, arguments: &str) {
        let status = as_postgres(&format!(
            "'{}/pg_ctl' -D '{}' {arguments} >/dev/null",
            self.bin.display(),
            self.socket_dir.join("data").display(),
        ))
        .status()
        .expect("pg_ctl runs");
        assert!(status.success(), "pg_ctl {arguments} failed");
    }
}

/// Where Debian puts a PostgreSQL's programs (the newest, if several).
fn installed() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A shell command run as the `postgres` user when we are root.
fn as_postgres(script: &str) -> Command {
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--", "sh", "-c", script]);
        command
    } else {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }
}

/// Starts a server with `settings` (`-c name=value …`). The tests that
/// need one are `#[ignore]`d for it, so a missing PostgreSQL fails them.
fn start(settings: &str) -> Postgres {
    let bin = installed().expect(
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): apt-get install \
         postgresql (.ci/run does)",
    );
    let dir = tempfile::Builder::new()
        .prefix("crosstalk-pg")
        .tempdir()
        .expect("a temp dir")
        .keep();
    if running_as_root() {
        let uid = Command::new("id")
            .args(["-u", "postgres"])
            .output()
            .expect("id runs");
        assert!(
            uid.status.success(),
            "there is no postgres user to run PostgreSQL as"
        );
        let uid: u32 = String::from_utf8_lossy(&uid.stdout).trim().parse().unwrap();
        std::os::unix::fs::chown(&dir, Some(uid), None).expect("chown the temp dir");
    }
    let options = format!(
        "-k {} -p 5432 -c listen_addresses='' {settings}",
        dir.display()
    );
    let script = format!(
        r#"set -e
bin='{bin}'; dir='{dir}'
"$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-sync >"$dir/initdb.log" 2>&1
"$bin/pg_ctl" -D "$dir/data" -w -l "$dir/server.log" -o "{options}" start >/dev/null
echo ready
read -r _ || true
"$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
rm -rf "$dir"
"#,
        bin = bin.display(),
        dir = dir.display(),
    );
    let mut child = as_postgres(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the PostgreSQL start script runs");
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    if ready.trim() != "ready" {
        let log = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        panic!(
            "PostgreSQL did not start:\n{}\n{}",
            log("initdb.log"),
            log("server.log")
        );
    }
    Postgres {
        socket_dir: dir,
        bin,
        options,
        _script: child,
    }
}
