//! Several relays on one PostgreSQL, beside SQLite, in the same run.
//!
//! Run with `cargo run --release --example instances` (needs Debian's
//! `postgresql`; it starts a server of its own with PostgreSQL's default,
//! durable settings in a temporary directory, as the tests do).
//!
//! - sends per second: 32 clients posting to a channel over REST as fast as
//!   the relays answer, for a fixed number of posts: on SQLite (one relay),
//!   on PostgreSQL with one relay, and with two relays (16 clients each).
//! - a wake-up across relays: bob waits on relay B (`GET /api/inbox`), alice
//!   sends on relay A; the time from the start of the send until bob's call
//!   returns with it, over 500 sends. Baselines: the same on one
//!   PostgreSQL relay, and on one SQLite relay.
//!
//! The relays run in this process (each a real server on a loopback port)
//! and share its two cores with the clients and the database.

#[path = "../tests/relay/postgres.rs"]
#[allow(dead_code)]
mod postgres;

use crosstalk::config::{Config, DatabaseUrl, Limits};
use crosstalk::server::{self, Running};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CLIENTS: usize = 32;
const POSTS: usize = 6_000;
const WAKES: usize = 500;

fn relay_config(db: std::path::PathBuf, url: Option<&DatabaseUrl>) -> Config {
    let mut config = Config::local(db);
    config.database_url = url.cloned();
    config.limits = Limits {
        per_credential: None,
        per_address: None,
    };
    config.settings.max_bytes_per_day = 0;
    config.settings.max_waits_per_person = usize::MAX;
    config.settings.max_waits = usize::MAX;
    config.connections.per_address = usize::MAX;
    config
}

async fn relay(dir: &std::path::Path, url: Option<&DatabaseUrl>) -> Running {
    server::spawn(relay_config(dir.join("relay.db"), url))
        .await
        .expect("a relay")
}

/// Posts `POSTS` messages from `CLIENTS` clients spread over `relays`;
/// returns posts per second.
async fn throughput(relays: &[&str], token: &str) -> f64 {
    let http = reqwest::Client::new();
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (http, url, token) = (
                http.clone(),
                relays[c % relays.len()].to_owned(),
                token.to_owned(),
            );
            tokio::spawn(async move {
                for n in 0..POSTS / CLIENTS {
                    let answer = http
                        .post(format!("{url}/api/channels/bench/messages"))
                        .bearer_auth(&token)
                        .json(&json!({ "body": format!("post {c}/{n}") }))
                        .send()
                        .await
                        .expect("an answer");
                    assert_eq!(answer.status(), 201);
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    (POSTS / CLIENTS * CLIENTS) as f64 / started.elapsed().as_secs_f64()
}

/// The time from a send on `from` until bob's waiting claim on `waiter`
/// returns with it: p50 and p99 over `WAKES` sends.
async fn wakes(sender: &Running, waiter: &Running, alice: &str, bob: &str) -> (Duration, Duration) {
    let http = reqwest::Client::new();
    let mut samples = Vec::with_capacity(WAKES);
    for n in 0..WAKES {
        let mut parked = waiter.state.relay.parked_waits();
        let before = *parked.borrow_and_update();
        let claim = tokio::spawn({
            let (http, url, bob) = (http.clone(), waiter.url(), bob.to_owned());
            async move {
                let answer: Value = http
                    .get(format!("{url}/api/inbox?timeout_s=30"))
                    .bearer_auth(bob)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                (answer, Instant::now())
            }
        });
        parked.wait_for(|p| *p > before).await.unwrap();
        let started = Instant::now();
        let sent = http
            .post(format!("{}/api/messages", sender.url()))
            .bearer_auth(alice)
            .json(&json!({ "to": "bob", "body": format!("wake {n}") }))
            .send()
            .await
            .unwrap();
        assert_eq!(sent.status(), 201);
        let (answer, woken) = claim.await.unwrap();
        assert_eq!(answer["messages"][0]["body"], format!("wake {n}"));
        samples.push(woken - started);
    }
    samples.sort();
    (samples[WAKES / 2], samples[WAKES * 99 / 100])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn people(team: &crosstalk::relay::Team) -> (String, String) {
    let token = |handle: &'static str| async move {
        team.add(handle, None)
            .await
            .unwrap()
            .token
            .expose()
            .to_owned()
    };
    (token("alice").await, token("bob").await)
}

#[tokio::main]
async fn main() {
    crosstalk::tls::install_crypto_provider();
    let Some(server) = postgres::durable("") else {
        eprintln!("this benchmark needs PostgreSQL: apt-get install postgresql");
        std::process::exit(1);
    };
    println!(
        "crosstalk on PostgreSQL beside SQLite: release build, {CLIENTS} clients, \
         loopback HTTP, relays and database sharing this machine's cores"
    );
    let dir = tempfile::tempdir().unwrap();

    // SQLite, one relay.
    let sqlite = relay(&dir.path().join("sqlite"), None).await;
    let (alice, bob) = people(sqlite.state.relay.team()).await;
    let sqlite_sends = throughput(&[&sqlite.url()], &alice).await;
    let sqlite_wake = wakes(&sqlite, &sqlite, &alice, &bob).await;
    sqlite.stop().await.unwrap();

    // PostgreSQL: one relay, then two on the same database.
    let url: DatabaseUrl = server.database().await.parse().unwrap();
    let database = crosstalk::config::Database {
        db: dir.path().join("unused.db"),
        database_url: Some(url.clone()),
        sqlite_sync: Default::default(),
    };
    let (alice, bob) = people(&server::open_team(&database, true).await.unwrap()).await;
    let a = relay(&dir.path().join("a"), Some(&url)).await;
    let b = relay(&dir.path().join("b"), Some(&url)).await;
    let one = throughput(&[&a.url()], &alice).await;
    let two = throughput(&[&a.url(), &b.url()], &alice).await;
    let same = wakes(&a, &a, &alice, &bob).await;
    let across = wakes(&a, &b, &alice, &bob).await;

    println!("\nsends per second ({POSTS} channel posts, REST)");
    println!("  SQLite, one relay                 {sqlite_sends:>8.0}/s");
    println!(
        "  PostgreSQL, one relay             {one:>8.0}/s  ({:.2} of SQLite)",
        one / sqlite_sends
    );
    println!(
        "  PostgreSQL, two relays            {two:>8.0}/s  ({:.2} of one relay)",
        two / one
    );
    println!("\nwake-up: a send until the waiting claim returns ({WAKES} sends)");
    for (name, (p50, p99)) in [
        ("SQLite, one relay (baseline)", sqlite_wake),
        ("PostgreSQL, one relay (baseline)", same),
        ("PostgreSQL, across two relays", across),
    ] {
        println!(
            "  {name:<34} p50 {:>6.2} ms  p99 {:>6.2} ms",
            ms(p50),
            ms(p99)
        );
    }
    println!(
        "  across / one PostgreSQL relay      p50 {:>6.2}x    p99 {:>6.2}x",
        across.0.as_secs_f64() / same.0.as_secs_f64(),
        across.1.as_secs_f64() / same.1.as_secs_f64()
    );
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}
