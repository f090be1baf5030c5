//! Operating the appliance: the install script, the admin commands with the
//! service's own configuration, check, backup and restore, upgrades.

use crate::support::{post, spawn_app, stdout, token_in};
use crosstalk::config::Config;
use serde_json::json;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The binary with only the given variables in its environment.
fn crosstalk_with(vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crosstalk"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (name, value) in vars {
        command.env(name, value);
    }
    command.args(args).output().expect("run crosstalk")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn install(root: &Path, extra: &[&str]) -> String {
    let output = Command::new("sh")
        .arg(repo().join("deploy/install.sh"))
        .args([
            "--root",
            root.to_str().unwrap(),
            "--binary",
            env!("CARGO_BIN_EXE_crosstalk"),
        ])
        .args(extra)
        .output()
        .expect("run install.sh");
    assert!(
        output.status.success(),
        "install.sh failed: {}",
        stderr(&output)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Every file and folder under `root`: its mode, owner and contents' hash.
fn tree(root: &Path) -> BTreeMap<String, (u32, u32, u64, Vec<u8>)> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let contents = if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                Vec::new()
            };
            let key = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            found.insert(
                key,
                (
                    meta.permissions().mode() & 0o7777,
                    meta.uid(),
                    meta.mtime() as u64,
                    contents,
                ),
            );
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    found
}

#[test]
fn install_into_a_root_is_idempotent_and_uninstall_keeps_the_data_unless_purged() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let dry = install(root, &["--dry-run", "--domain", "relay.example.com"]);
    assert!(dry.contains("would install"), "{dry}");
    assert_eq!(
        std::fs::read_dir(root).unwrap().count(),
        0,
        "a dry run changes nothing"
    );

    let first = install(
        root,
        &[
            "--domain",
            "relay.example.com",
            "--email",
            "ops@example.com",
        ],
    );
    assert!(first.contains("installed"), "{first}");
    let installed = tree(root);
    let me = rustix::process::geteuid().as_raw();
    let expect = [
        ("usr/local/bin/crosstalk", 0o755),
        ("usr/local/bin/crosstalk-admin", 0o755),
        ("etc/systemd/system/crosstalk.service", 0o644),
        ("etc/systemd/system/crosstalk-backup.service", 0o644),
        ("etc/systemd/system/crosstalk-backup.timer", 0o644),
        ("usr/lib/sysusers.d/crosstalk.conf", 0o644),
        ("etc/crosstalk", 0o750),
        ("etc/crosstalk/crosstalk.env", 0o640),
        ("var/lib/crosstalk", 0o700),
    ];
    for (path, mode) in expect {
        let (found, owner, _, _) = installed
            .get(path)
            .unwrap_or_else(|| panic!("{path} is installed"));
        assert_eq!(*found, mode, "{path} has mode {found:o}");
        assert_eq!(
            *owner, me,
            "{path} belongs to the installing user under --root"
        );
    }
    let env = String::from_utf8(installed["etc/crosstalk/crosstalk.env"].3.clone()).unwrap();
    assert!(env.contains("\nRELAY_DOMAINS=relay.example.com\n"), "{env}");
    assert!(
        env.contains("\nRELAY_ACME_EMAIL=ops@example.com\n"),
        "{env}"
    );

    // A second run with the same options changes nothing at all.
    let again = install(
        root,
        &[
            "--domain",
            "relay.example.com",
            "--email",
            "ops@example.com",
        ],
    );
    assert!(again.contains("Nothing to change"), "{again}");
    assert!(
        again.lines().all(|line| line.starts_with("unchanged ")
            || line.starts_with("kept ")
            || line.starts_with("Nothing")),
        "{again}"
    );
    assert_eq!(tree(root), installed);

    // An operator's change to the configuration is kept by an upgrade.
    let env_file = root.join("etc/crosstalk/crosstalk.env");
    std::fs::write(&env_file, format!("{env}RELAY_RETENTION_DAYS=7\n")).unwrap();
    let upgrade = install(root, &[]);
    assert!(upgrade.contains("kept"), "{upgrade}");
    assert!(
        std::fs::read_to_string(&env_file)
            .unwrap()
            .ends_with("RELAY_RETENTION_DAYS=7\n")
    );

    std::fs::write(root.join("var/lib/crosstalk/relay.db"), b"data").unwrap();
    let removed = install(root, &["--uninstall"]);
    assert!(removed.contains("are kept"), "{removed}");
    assert!(!root.join("usr/local/bin/crosstalk").exists());
    assert!(!root.join("etc/systemd/system/crosstalk.service").exists());
    assert!(root.join("var/lib/crosstalk/relay.db").exists());
    assert!(env_file.exists());
    install(root, &["--uninstall", "--purge"]);
    assert!(!root.join("var/lib/crosstalk").exists());
    assert!(!root.join("etc/crosstalk").exists());
}

/// The shipped example configuration, as systemd's EnvironmentFile reads it
/// (empty values included), with the database moved to `db`.
fn example_env(db: &Path) -> Vec<(String, String)> {
    let file = crosstalk::cli::read_env_file(&repo().join("deploy/crosstalk.env.example")).unwrap();
    let mut vars: Vec<(String, String)> = file.into_iter().collect();
    for (name, value) in &mut vars {
        if name == "RELAY_DB" {
            *value = db.to_string_lossy().into_owned();
        }
    }
    vars
}

#[test]
fn admin_commands_work_with_the_services_own_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let vars = example_env(&db);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    // Loaded as systemd loads it: every variable in the environment, the
    // empty ones (RELAY_PORT=) too.
    let added = stdout(&crosstalk_with(&vars, &["add", "dana", "Dana Scully"]));
    assert!(
        added.contains("claude mcp add --transport http crosstalk https://relay.example.com/mcp "),
        "{added}"
    );
    assert!(
        added.contains("crosstalk connect claude --url https://relay.example.com --token"),
        "{added}"
    );
    // Read by --env-file, as crosstalk-admin runs it; the process's own
    // RELAY_DB (set) wins over the file's.
    let db_var = [("RELAY_DB", db.to_str().unwrap())];
    let example = repo().join("deploy/crosstalk.env.example");
    let rotated = stdout(&crosstalk_with(
        &db_var,
        &["--env-file", example.to_str().unwrap(), "rotate", "dana"],
    ));
    assert!(
        rotated.contains("https://relay.example.com/mcp"),
        "{rotated}"
    );
    token_in(&rotated);
    // Without a public name, no token is made for lines that would not work.
    let unusable = crosstalk_with(
        &[
            ("RELAY_DB", db.to_str().unwrap()),
            ("RELAY_HOST", "0.0.0.0"),
            ("RELAY_PORT", ""),
        ],
        &["add", "erin"],
    );
    assert!(!unusable.status.success());
    assert!(
        stderr(&unusable).contains("set RELAY_PUBLIC_URL"),
        "{}",
        stderr(&unusable)
    );
    let people = stdout(&crosstalk_with(&db_var, &["people"]));
    assert!(!people.contains("erin"), "{people}");
}

#[test]
fn read_commands_never_create_a_database_and_say_which_variable_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo").join("relay.db");
    let vars = [("RELAY_DB", missing.to_str().unwrap())];
    for args in [&["people"][..], &["backup", "/tmp/never-written.db"]] {
        let output = crosstalk_with(&vars, args);
        assert!(!output.status.success(), "{args:?}");
        let said = stderr(&output);
        assert_eq!(said.lines().count(), 1, "one line: {said}");
        assert!(said.contains("RELAY_DB"), "{said}");
        assert!(said.contains(&missing.display().to_string()), "{said}");
    }
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let checked = crosstalk_with(
        &[
            ("RELAY_DB", missing.to_str().unwrap()),
            ("RELAY_PORT", &free),
        ],
        &["check"],
    );
    assert!(checked.status.success(), "{}", stderr(&checked));
    assert!(!missing.exists(), "a read command created the database");
    assert!(!missing.parent().unwrap().exists());
}

/// The README's first command: every part of the story is shown, and
/// nothing else is printed.
#[test]
fn the_demo_tells_its_whole_story_and_nothing_else() {
    let demo = crosstalk_with(&[], &["demo"]);
    assert!(demo.status.success(), "{}", stderr(&demo));
    let said = stdout(&demo);
    for line in [
        "bob    send_message(to: alice, ANSWER) in the same thread",
        "bob    post_message(#release, ANSWER, reply_to: 3) -> id 4",
        "alice  post_message(#release, DONE) -> id 5",
        "#5 [DONE] alice: Tagged v1.4.0. Thanks!",
        "send_message -> refused: the message looks like it contains an AWS access key id",
        "bob    check_inbox -> 0 new messages",
        "it lists #release and thread 1",
        "Done: the relay stopped and its database was deleted.",
    ] {
        assert!(said.contains(line), "{line:?} not in:\n{said}");
    }
    assert_eq!(stderr(&demo), "", "the demo printed beside its story");
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let printed = stdout(&crosstalk_with(&[], &["--version"]));
    assert!(
        printed.starts_with(&format!("crosstalk {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{printed}"
    );
    assert!(printed.contains(", built 20"), "{printed}");
}

/// Runs `check` with these variables; its output and whether it passed.
fn check(vars: &[(&str, &str)]) -> (bool, String) {
    let output = crosstalk_with(vars, &["check"]);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned() + &stderr(&output),
    )
}

/// `check` run beside the relay it checks knows the port is the relay's
/// own, and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_beside_a_running_relay_says_it_serves() {
    let app = spawn_app().await;
    let port = app.url().rsplit(':').next().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db").display().to_string();
    let (ok, said) =
        tokio::task::spawn_blocking(move || check(&[("RELAY_DB", &db), ("RELAY_PORT", &port)]))
            .await
            .unwrap();
    assert!(ok, "{said}");
    assert!(said.contains("ok    RELAY_PORT"), "{said}");
    assert!(
        said.contains("a crosstalk relay already serves on 127.0.0.1:"),
        "{said}"
    );
}

/// What only looks like a relay is not taken for one: a listener that
/// sends the document's path to another machine (the redirect is not
/// followed there), or one that answers without end.
#[test]
fn check_takes_no_other_listener_for_a_relay() {
    use std::io::{Read, Write};
    let answers: [&[u8]; 2] = [
        b"HTTP/1.1 308 Permanent Redirect\r\nLocation: https://relay.example.com:9/api/openapi.json\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"info\": {\"title\": \"crosstalk\", \"pad\": \"",
    ];
    for answer in answers {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port().to_string();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(answer);
                // The second answer goes on: 64 MiB of padding, unended.
                if answer.starts_with(b"HTTP/1.1 200") {
                    let pad = vec![b'x'; 1 << 16];
                    for _ in 0..1024 {
                        if stream.write_all(&pad).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("relay.db").display().to_string();
        let (ok, said) = check(&[("RELAY_DB", &db), ("RELAY_PORT", &port)]);
        assert!(!ok, "{said}");
        assert!(said.contains("FAIL  RELAY_PORT"), "{said}");
        assert!(!said.contains("already serves"), "{said}");
    }
}

#[test]
fn check_names_each_problem_and_fails_where_serve_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let db = db.to_str().unwrap();
    stdout(&crosstalk_with(&[("RELAY_DB", db)], &["add", "alice"]));
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();

    let (ok, said) = check(&[("RELAY_DB", db), ("RELAY_PORT", &free)]);
    assert!(ok, "{said}");
    assert!(said.contains("1 people can connect"), "{said}");

    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[("RELAY_DB", db), ("RELAY_RETENTION_DAYS", "0")],
            "FAIL  configuration",
        ),
        (
            &[("RELAY_DB", db), ("RELAY_PORT", &busy_port)],
            "FAIL  RELAY_PORT",
        ),
        (
            &[
                ("RELAY_DB", "/nonexistent-crosstalk-check/relay.db"),
                ("RELAY_PUBLIC_URL", "https://relay.example.com"),
                ("RELAY_PORT", &free),
            ],
            "FAIL  credentials",
        ),
        (
            &[
                ("RELAY_DB", db),
                ("RELAY_TLS_CERT", "/nonexistent.pem"),
                ("RELAY_TLS_KEY", "/nonexistent.pem"),
            ],
            "FAIL  configuration",
        ),
    ];
    for (vars, finding) in cases {
        let (ok, said) = check(vars);
        assert!(!ok, "{vars:?} passed:\n{said}");
        assert!(said.contains(finding), "{vars:?}:\n{said}");
    }
    // A durability the relay does not know is refused by name.
    let refused = crosstalk_with(
        &[("RELAY_DB", db), ("RELAY_SQLITE_SYNC", "sometimes")],
        &["check"],
    );
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("RELAY_SQLITE_SYNC is full or normal"),
        "{said}"
    );
    // A database others may read is worth a warning, not a refusal.
    std::fs::set_permissions(db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, said) = check(&[("RELAY_DB", db), ("RELAY_PORT", &free)]);
    assert!(ok, "{said}");
    assert!(
        said.contains("warn  RELAY_DB") && said.contains("chmod 600"),
        "{said}"
    );
    drop(busy);
}

#[tokio::test]
async fn a_backup_under_write_load_holds_every_acknowledged_message_and_serves_again() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|n| {
            let (url, token, stop) = (app.url(), alice.clone(), stop.clone());
            tokio::spawn(async move {
                let client = crate::support::http();
                let mut acknowledged = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let response = client
                        .post(format!("{url}/api/channels/load/messages"))
                        .bearer_auth(&token)
                        .json(&json!({ "body": format!("writer {n}") }))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 201);
                    let id = response.json::<serde_json::Value>().await.unwrap()["id"]
                        .as_i64()
                        .unwrap();
                    acknowledged.push((std::time::Instant::now(), id));
                }
                acknowledged
            })
        })
        .collect();
    // Some load first, then the backup in the middle of it.
    let (status, first) = post(
        &app,
        "/api/channels/load/messages",
        &alice,
        json!({ "body": "before" }),
    )
    .await;
    assert_eq!(status, 201);
    let copy = tempfile::tempdir().unwrap();
    let copy_db = copy.path().join("copy.db");
    let db = app.db.clone();
    let started = std::time::Instant::now();
    let copy_path = copy_db.clone();
    let backed_up = tokio::task::spawn_blocking(move || {
        crosstalk_with(
            &[("RELAY_DB", db.to_str().unwrap())],
            &["backup", copy_path.to_str().unwrap()],
        )
    })
    .await
    .unwrap();
    assert!(backed_up.status.success(), "{}", stderr(&backed_up));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut before_backup = vec![first["id"].as_i64().unwrap()];
    for writer in writers {
        before_backup.extend(
            writer
                .await
                .unwrap()
                .into_iter()
                .filter(|(at, _)| *at < started)
                .map(|(_, id)| id),
        );
    }
    assert!(before_backup.len() > 1, "writes were under way");

    // Read back by serving the copy.
    let restored = crosstalk::server::spawn(Config::local(copy_db))
        .await
        .unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut since = crosstalk::model::MessageId(0);
    loop {
        let page = restored
            .state
            .relay
            .channel_messages("load", Some(since), None)
            .await
            .unwrap();
        if page.messages.is_empty() {
            break;
        }
        since = page.last_id;
        seen.extend(page.messages.iter().map(|m| m.id.0));
    }
    let lost: Vec<i64> = before_backup
        .iter()
        .filter(|id| !seen.contains(id))
        .copied()
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged before the backup, missing from it: {lost:?}"
    );
    assert!(restored.state.relay.team().people().await.unwrap().len() == 1);
    restored.stop().await.unwrap();
}

#[tokio::test]
async fn restore_refuses_while_a_relay_serves_and_works_once_it_stopped() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "kept" }),
    )
    .await;
    let copy = tempfile::tempdir().unwrap();
    let copy_db = copy.path().join("copy.db");
    let db = app.db.to_str().unwrap().to_owned();
    let vars = [("RELAY_DB", db.as_str())];
    stdout(&crosstalk_with(
        &vars,
        &["backup", copy_db.to_str().unwrap()],
    ));
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "after the backup" }),
    )
    .await;

    let refused = crosstalk_with(&vars, &["restore", copy_db.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("stop it first"),
        "{}",
        stderr(&refused)
    );

    let db_path = app.db.clone();
    app.running.stop().await.unwrap();
    stdout(&crosstalk_with(
        &vars,
        &["restore", copy_db.to_str().unwrap()],
    ));
    let running = crosstalk::server::spawn(Config::local(db_path))
        .await
        .unwrap();
    let page = running
        .state
        .relay
        .channel_messages("ops", None, None)
        .await
        .unwrap();
    let bodies: Vec<&str> = page.messages.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["kept"]);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_database_from_the_first_schema_is_upgraded_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let token = crosstalk::model::Token::generate();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(crosstalk::store::sqlite::MIGRATIONS[0])
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO people (handle, name, token_hash, created_at) VALUES ('alice', 'Alice', ?1, 1)",
            [&token.hash().as_bytes()[..]],
        )
        .unwrap();
        let far = crosstalk::model::now_millis() + 86_400_000;
        conn.execute(
            "INSERT INTO messages (channel, sender, type, body, created_at, expires_at) \
             VALUES ('ops', 'alice', 'NOTE', 'from the first schema', 1, ?1)",
            [far],
        )
        .unwrap();
    }
    let running = crosstalk::server::spawn(Config::local(db.clone()))
        .await
        .unwrap();
    let url = running.url();
    let answer = crate::support::http()
        .get(format!("{url}/api/channels/ops/messages"))
        .bearer_auth(token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let page: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(page["messages"][0]["body"], "from the first schema");
    running.stop().await.unwrap();
    let version: usize = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, crosstalk::store::sqlite::MIGRATIONS.len());
}

#[tokio::test]
async fn a_backup_never_writes_through_a_link_at_its_destination() {
    let app = spawn_app().await;
    app.add_person("alice").await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere.db");
    let link = dir.path().join("backup.db");
    // A dangling link: it names a file that does not exist yet.
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let db = app.db.to_str().unwrap().to_owned();
    let refused = crosstalk_with(
        &[("RELAY_DB", db.as_str())],
        &["backup", link.to_str().unwrap()],
    );
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("exists already (a file or a link)"),
        "{}",
        stderr(&refused)
    );
    assert!(!target.exists(), "nothing was written through the link");
    // A new path is made, the relay's user's alone.
    let fresh = dir.path().join("fresh.db");
    let made = crosstalk_with(
        &[("RELAY_DB", db.as_str())],
        &["backup", fresh.to_str().unwrap()],
    );
    assert!(made.status.success(), "{}", stderr(&made));
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn install_refuses_values_that_would_corrupt_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (flag, value) in [
        ("--email", "a&b@example.com"),
        ("--email", "ops@example.com\\nRELAY_ALLOW_PLAIN_HTTP=1"),
        ("--email", "ops@example.com\nRELAY_ALLOW_PLAIN_HTTP=1"),
        ("--domain", "relay.example.com|evil"),
        ("--domain", "relay.example.com\nRELAY_TOKEN=x"),
    ] {
        let output = Command::new("sh")
            .arg(repo().join("deploy/install.sh"))
            .args(["--root", root.to_str().unwrap()])
            .args(["--binary", env!("CARGO_BIN_EXE_crosstalk"), flag, value])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag} {value:?}");
        assert!(stderr(&output).contains("is not"), "{}", stderr(&output));
        assert_eq!(
            std::fs::read_dir(root).unwrap().count(),
            0,
            "nothing changed"
        );
    }
    // A good value is written as it is, once, in place of the example's line.
    install(
        root,
        &[
            "--email",
            "ops+relay@example.com",
            "--domain",
            "a.example.com,b.example.com",
        ],
    );
    let env = std::fs::read_to_string(root.join("etc/crosstalk/crosstalk.env")).unwrap();
    assert_eq!(
        env.lines()
            .filter(|l| l.starts_with("RELAY_ACME_EMAIL="))
            .collect::<Vec<_>>(),
        ["RELAY_ACME_EMAIL=ops+relay@example.com"]
    );
    assert!(
        env.lines()
            .any(|l| l == "RELAY_DOMAINS=a.example.com,b.example.com"),
        "{env}"
    );
    assert!(!env.contains("RELAY_ALLOW_PLAIN_HTTP=1"));
}

/// `Type=notify`: `crosstalk serve` tells systemd's notify socket it is
/// ready once it listens (a request then finds it serving), feeds the
/// watchdog at half its interval, and says it is stopping at SIGTERM. The
/// test plays systemd: it binds the socket and sets the variables systemd
/// sets.
#[tokio::test]
async fn serve_tells_systemd_it_is_ready_once_it_listens_and_feeds_the_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = tokio::net::UnixDatagram::bind(&socket_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["serve", "--port", "0"])
        .env("RELAY_DB", dir.path().join("relay.db"))
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "400000")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = crate::support::LogWatch::new(&mut child);
    let next = || async {
        let mut said = vec![0u8; 256];
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), socket.recv(&mut said))
            .await
            .expect("the relay tells systemd")
            .unwrap();
        String::from_utf8(said[..n].to_vec()).unwrap()
    };
    assert_eq!(next().await, "READY=1");
    let url = log.serving_url();
    let ready = crate::support::http()
        .get(format!("{url}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "serving when it said it was ready");
    assert_eq!(next().await, "WATCHDOG=1");
    assert_eq!(next().await, "WATCHDOG=1");
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let stopping = loop {
        match next().await.as_str() {
            "WATCHDOG=1" => continue,
            other => break other.to_owned(),
        }
    };
    assert_eq!(stopping, "STOPPING=1");
    assert!(child.wait().unwrap().success(), "a clean stop");
}
