//! Reads as the history fills: a relay with 0, 10k, 100k and 1M messages.
//!
//! Run with `cargo run --release --example scale` (`-- --largest 100000` to
//! stop earlier). Each relay is filled through the store's own write path
//! (group commit, summaries and all) with a mix of channel posts and
//! direct messages in threads, then served on loopback and read over HTTP
//! as clients read it. Every read is reported at each size beside the same
//! read at 10k messages (a ratio holds on a noisy machine). Last, every
//! message of the largest relay expires, and the purge is timed while a
//! writer posts every few milliseconds: the longest any of its posts waits
//! is the longest the purge held the writer.

use crosstalk::config::{Config, Limits};
use crosstalk::model::{Channel, Handle, ThreadId, Token, now_millis};
use crosstalk::relay::{ChannelPost, Content};
use crosstalk::server;
use crosstalk::store::{Conversation, NewMessage, RecipientCheck, SqliteStore, Store};
use futures::StreamExt;
use std::time::{Duration, Instant};

const ROUNDS: usize = 200;
const CHANNELS: usize = 20;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Fills `db` with `n` messages: half channel posts over `CHANNELS`
/// channels (a tenth of them to bob's inbox), half direct messages, one in
/// three opening a thread and the rest replying in one.
async fn fill(db: &std::path::Path, n: usize, alice: &Token, bob: &Token) -> usize {
    let store = SqliteStore::open(db).expect("store");
    let now = now_millis();
    let (a, b) = (
        Handle::parse("alice").unwrap(),
        Handle::parse("bob").unwrap(),
    );
    store
        .add_person(&a, "Alice", alice.hash(), now)
        .await
        .unwrap();
    store.add_person(&b, "Bob", bob.hash(), now).await.unwrap();
    store
        .add_person(
            &Handle::parse("carol").unwrap(),
            "Carol",
            Token::generate().hash(),
            now,
        )
        .await
        .unwrap();
    let store = &store;
    futures::stream::iter(0..n)
        .map(|i| {
            let (a, b) = (a.clone(), b.clone());
            async move {
                let (conversation, to) = if i % 2 == 0 {
                    let channel = Channel::parse(&format!("c{}", i % CHANNELS)).unwrap();
                    (
                        Conversation::Channel(channel),
                        (i % 20 == 0).then(|| b.clone()),
                    )
                } else if i % 6 == 1 {
                    (Conversation::NewThread, Some(b.clone()))
                } else {
                    // A thread made a little earlier (threads are numbered
                    // from 1, one for every six messages).
                    let made = (i / 6).max(1) as i64;
                    (
                        Conversation::Thread(ThreadId(1 + (i as i64 * 7919) % made)),
                        Some(b.clone()),
                    )
                };
                let message = NewMessage {
                    conversation,
                    from: a,
                    to,
                    check_to: RecipientCheck::None,
                    kind: "NOTE".into(),
                    body: format!("status update {i}: build passed, deploying to staging"),
                    reply_to: None,
                    created_at: now + i as i64,
                    expires_at: now + 30 * 86_400_000,
                    expects: crosstalk::model::Expects::Nothing,
                    due_at: None,
                    attachments: Vec::new(),
                };
                store.insert_message(message).await.is_ok()
            }
        })
        .buffer_unordered(256)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await
}

/// Brings the search index up to date (the relay does it in batches, before
/// a search and every minute, so a relay that filled over weeks has it up
/// to date); returns how long it took.
async fn index(db: &std::path::Path) -> Duration {
    let store = SqliteStore::open(db).expect("store");
    let started = Instant::now();
    store
        .search("update", None, 1, now_millis())
        .await
        .expect("search");
    started.elapsed()
}

fn unlimited(db: std::path::PathBuf) -> Config {
    let mut config = Config::local(db);
    config.limits = Limits {
        per_credential: None,
        per_address: None,
    };
    config.settings.max_bytes_per_day = 0;
    config
}

/// p50 and p99 of `ROUNDS` runs of `request`.
async fn measure<F, Fut>(mut request: F) -> (Duration, Duration)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let started = Instant::now();
        request(round).await;
        samples.push(started.elapsed());
    }
    (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    )
}

/// Sends a request that must succeed, and reads its whole answer.
async fn fetch(request: reqwest::RequestBuilder) {
    let response = request.send().await.expect("an answer");
    assert!(response.status().is_success(), "{}", response.status());
    response.bytes().await.expect("the body");
}

const READS: [&str; 8] = [
    "list channels (GET /api/channels)",
    "page overview (GET /, HTML)",
    "a thread (GET /api/threads/ID)",
    "a channel after since_id (50 newest)",
    "an inbox claim (GET /api/inbox)",
    "a post (POST .../messages)",
    "a search, common words (20 newest)",
    "a search, a rare word (every generation)",
];

async fn reads(url: &str, alice: &str, bob: &str, carol: &str) -> Vec<(Duration, Duration)> {
    let http = reqwest::Client::new();
    let get =
        |path: String, token: &str| fetch(http.get(format!("{url}{path}")).bearer_auth(token));
    let channels: serde_json::Value = http
        .get(format!("{url}/api/channels"))
        .bearer_auth(alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last_c1 = channels["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "c1")
        .map_or(0, |c| c["last_id"].as_i64().unwrap());
    let thread = {
        let sent: serde_json::Value = http
            .post(format!("{url}/api/messages"))
            .bearer_auth(alice)
            .json(&serde_json::json!({ "to": "bob", "body": "a question" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        sent["thread_id"].as_i64().unwrap()
    };
    let mut figures = Vec::new();
    figures.push(measure(|_| get("/api/channels".into(), alice)).await);
    figures.push(
        measure(|_| fetch(http.get(format!("{url}/")).basic_auth("alice", Some(alice)))).await,
    );
    figures.push(measure(|_| get(format!("/api/threads/{thread}"), alice)).await);
    figures.push(
        measure(|_| {
            get(
                format!(
                    "/api/channels/c1/messages?since_id={}",
                    (last_c1 - 100).max(0)
                ),
                alice,
            )
        })
        .await,
    );
    figures.push(
        measure(|round| {
            let post = http
                .post(format!("{url}/api/messages"))
                .bearer_auth(alice)
                .json(&serde_json::json!({ "to": "carol", "body": format!("ping {round}") }));
            let claim = fetch(http.get(format!("{url}/api/inbox")).bearer_auth(carol));
            async move {
                post.send().await.unwrap();
                claim.await;
            }
        })
        .await,
    );
    figures.push(
        measure(|round| {
            let request = http
                .post(format!("{url}/api/channels/c2/messages"))
                .bearer_auth(bob)
                .json(&serde_json::json!({ "body": format!("post {round}") }));
            async move {
                assert_eq!(request.send().await.unwrap().status(), 201);
            }
        })
        .await,
    );
    // Words in every message: the newest generation of the index answers.
    figures.push(measure(|_| get("/api/search?q=build%20deploying".into(), alice)).await);
    // A word in a dozen old messages: every generation is read.
    figures.push(measure(|_| get("/api/search?q=update%2012345".into(), alice)).await);
    figures
}

#[tokio::main]
async fn main() {
    let largest = std::env::args()
        .skip_while(|a| a != "--largest")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000usize);
    let sizes: Vec<usize> = [0, 10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|n| *n <= largest)
        .collect();
    println!("crosstalk at scale: release build, {ROUNDS} rounds of each read, over loopback HTTP");
    let mut table: Vec<(usize, Vec<(Duration, Duration)>)> = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    let mut last = None;
    for &size in &sizes {
        let db = dir.path().join(format!("relay-{size}.db"));
        let (alice, bob) = (Token::generate(), Token::generate());
        let started = Instant::now();
        let stored = fill(&db, size, &alice, &bob).await;
        println!(
            "\n{size} messages: stored {stored} in {:.1} s ({:.0} a second, summaries included)",
            started.elapsed().as_secs_f64(),
            stored as f64 / started.elapsed().as_secs_f64().max(1e-9)
        );
        println!(
            "  search index brought up to date in {:.1} s",
            index(&db).await.as_secs_f64()
        );
        let running = server::spawn(unlimited(db.clone())).await.expect("relay");
        let carol = running.state.relay.team().rotate("carol").await.unwrap();
        let figures = reads(
            &running.url(),
            alice.expose(),
            bob.expose(),
            carol.token.expose(),
        )
        .await;
        for (name, (p50, p99)) in READS.iter().zip(&figures) {
            println!(
                "  {name:<40} p50 {:>7.3} ms  p99 {:>7.3} ms",
                ms(*p50),
                ms(*p99)
            );
        }
        table.push((size, figures));
        if size == *sizes.last().unwrap() {
            last = Some((running, db));
        } else {
            running.stop().await.unwrap();
        }
    }

    if let Some((_, at_10k)) = table.iter().find(|(size, _)| *size == 10_000) {
        println!("\neach read against the same read at 10k messages (p50, p99)");
        for (size, figures) in &table {
            if *size <= 10_000 {
                continue;
            }
            println!("  at {size}:");
            for ((name, (p50, p99)), (b50, b99)) in READS.iter().zip(figures).zip(at_10k) {
                println!(
                    "    {name:<40} {:>5.2}x  {:>5.2}x",
                    p50.as_secs_f64() / b50.as_secs_f64(),
                    p99.as_secs_f64() / b99.as_secs_f64()
                );
            }
        }
    }

    // Every message of the largest relay expires; the purge runs while a
    // writer posts every 5 ms.
    let Some((running, db)) = last else { return };
    // As after a quiet weekend: everything expired, nothing else written
    // meanwhile (so the write-ahead log is checkpointed, as it would be).
    let count = |db: &std::path::Path| -> i64 {
        rusqlite::Connection::open(db)
            .unwrap()
            .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
            .unwrap()
    };
    let expired = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        let expired = conn
            .execute("UPDATE messages SET expires_at = 1", [])
            .unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
        expired
    };
    let before = count(&db);
    let relay = running.state.relay.clone();
    let purged_all = tokio_util::sync::CancellationToken::new();
    let writer = {
        let (relay, purged_all) = (relay.clone(), purged_all.clone());
        let token = relay.team().rotate("bob").await.unwrap().token;
        let bob = relay.authenticate(Some(token.expose())).await.unwrap();
        tokio::spawn(async move {
            let mut waits = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_millis(5));
            for round in 0.. {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = purged_all.cancelled() => break,
                }
                let started = Instant::now();
                let post = ChannelPost {
                    channel: "during-purge".into(),
                    content: Content::text(format!("still writing {round}"), None),
                    ..ChannelPost::default()
                };
                relay.post(&bob, post).await.unwrap();
                waits.push(started.elapsed());
            }
            waits
        })
    };
    let started = Instant::now();
    relay.purge_expired().await.unwrap();
    let took = started.elapsed();
    // The relay's own purge (every minute) may have taken some batches.
    let purged = before - count(&db);
    purged_all.cancel();
    let mut waits = writer.await.unwrap();
    let longest = *waits.iter().max().unwrap();
    let p99 = percentile(&mut waits, 0.99);
    println!(
        "\npurge of {expired} expired messages: {purged} deleted in {:.1} s, in batches of {}",
        took.as_secs_f64(),
        crosstalk::store::PURGE_BATCH
    );
    println!(
        "  a post every 5 ms meanwhile ({} posts): p99 {:.1} ms, longest {:.1} ms",
        waits.len(),
        ms(p99),
        ms(longest)
    );
    let (summaries, size) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let left: i64 = conn
            .query_row("SELECT count(*) FROM channel_summaries", [], |r| r.get(0))
            .unwrap();
        (left, std::fs::metadata(&db).unwrap().len())
    };
    println!(
        "  afterwards: {summaries} channel summaries left, the file is {:.1} MB",
        size as f64 / 1e6
    );
    running.stop().await.unwrap();
}
