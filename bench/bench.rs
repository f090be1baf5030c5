//! Benchmarks of a real relay over real HTTP on loopback.
//!
//! Run with `cargo run --release --example bench` (`-- --seconds 10` for
//! longer throughput runs, `-- --subscribers 500` for a smaller fan-out,
//! `-- --scan` for the secret scan alone).
//! Every figure is printed beside a baseline measured in the same run
//! against a trivial endpoint of the same server stack (`GET /healthz`), so
//! the ratio holds on a noisy machine. Clients run in the same process as
//! the relay and share its two cores.
//!
//! - post-to-wake: one agent waits (MCP `check_inbox`, or REST
//!   `GET /api/inbox?timeout_s=50`); another sends it a message; the time
//!   from the start of the send until the waiting call returns with it.
//!   Baseline: one `/healthz` round trip.
//! - send throughput: 32 clients sending direct messages as fast as the relay
//!   answers, for a fixed time. Baseline: 32 clients calling `/healthz`.
//! - fan-out: N SSE subscribers on one channel; one post; the time until each
//!   subscriber has the event. Baseline: the same with one subscriber.
//! - memory: growth of the relay's resident memory per idle SSE subscriber.
//!   The fan-out runs against a second relay in a child process (this same
//!   binary, started with `--serve DB`) so its memory is the server's alone.

use crosstalk::agent::Agent;
use crosstalk::config::{Config, Connections, Limits};
use crosstalk::relay::{Content, DirectMessage, Relay};
use crosstalk::server;
use futures::future::join_all;
use serde_json::{Value, json};
use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

const CLIENTS: usize = 32;
const ROUNDS: usize = 300;

async fn connect(url: &str, token: &str) -> Agent {
    Agent::connect(url, token).await.expect("connect")
}

async fn call(agent: &Agent, tool: &'static str, arguments: Value) -> Value {
    agent.call(tool, arguments).await.ok()
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:>7.3} ms", d.as_secs_f64() * 1000.0)
}

fn line(label: &str, samples: &mut [Duration]) -> (Duration, Duration) {
    let (p50, p99) = (percentile(samples, 0.5), percentile(samples, 0.99));
    println!("  {label:<46} p50 {}  p99 {}", ms(p50), ms(p99));
    (p50, p99)
}

fn ratio(label: &str, of: (Duration, Duration), to: (Duration, Duration)) {
    println!(
        "  {label:<46} p50 {:>7.1}x     p99 {:>7.1}x",
        of.0.as_secs_f64() / to.0.as_secs_f64(),
        of.1.as_secs_f64() / to.1.as_secs_f64()
    );
}

/// Runs `work` from `CLIENTS` tasks for `seconds`; returns operations a second.
async fn throughput<F, Fut>(seconds: f64, work: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let work = Arc::new(work);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (work, stop, done) = (work.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    work(client).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("client task");
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Post-to-wake: `wait` starts a waiting call; once the relay reports it
/// parked, `send` is timed until the waiting call has returned.
/// Sends made to time a push.
const PUSH_ROUNDS: usize = 1000;

/// Sends `PUSH_ROUNDS` messages through the core from agent2 to agent3,
/// whose agent listens with `?push=1`; returns, for each, how long the send
/// took to be acknowledged and how long until the notification arrived.
async fn push_latency(
    relay: &Arc<Relay>,
    url: &str,
    tokens: &[String],
) -> (Vec<Duration>, Vec<Duration>) {
    let mut parked = relay.parked_waits();
    let before = *parked.borrow();
    let (_listening, mut pushes) = Agent::listening(url, &tokens[3])
        .await
        .expect("a listening session");
    parked
        .wait_for(|n| *n > before)
        .await
        .expect("its stream opened");
    let sender = relay
        .authenticate(Some(&tokens[2]))
        .await
        .expect("a known token");
    let (mut committed, mut pushed) = (Vec::new(), Vec::new());
    for round in 0..PUSH_ROUNDS {
        let started = Instant::now();
        let message = DirectMessage {
            to: "agent3".into(),
            content: Content::text(format!("question {round}"), None),
            ..DirectMessage::default()
        };
        relay.send_direct(&sender, message).await.expect("send");
        committed.push(started.elapsed());
        pushes.recv().await.expect("the push");
        pushed.push(started.elapsed());
    }
    (committed, pushed)
}

async fn post_to_wake<W, WF, S, SF>(relay: &Relay, wait: W, send: S) -> Vec<Duration>
where
    W: Fn(usize) -> WF,
    WF: Future<Output = Value> + Send + 'static,
    S: Fn(usize) -> SF,
    SF: Future<Output = ()>,
{
    let mut parked = relay.parked_waits();
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let before = *parked.borrow_and_update();
        let waiting = tokio::spawn(wait(round));
        parked
            .wait_for(|n| *n > before)
            .await
            .expect("relay running");
        let started = Instant::now();
        send(round).await;
        let received = waiting.await.expect("waiter");
        samples.push(started.elapsed());
        assert_eq!(received["messages"][0]["body"], format!("ping {round}"));
    }
    samples
}

/// Resident memory of a process, from /proc (Linux).
fn resident_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn flag(name: &str) -> Option<f64> {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
}

/// A loopback relay without rate limits or caps on waits: the benchmark is
/// one client process making as many requests as the relay can answer.
fn unlimited(db: std::path::PathBuf) -> Config {
    let mut config = Config::local(db);
    config.limits = Limits {
        per_credential: None,
        per_address: None,
    };
    config.settings.max_waits_per_person = usize::MAX;
    config.settings.max_waits = usize::MAX;
    config.settings.max_bytes_per_day = 0;
    // Every client is on loopback: one address for thousands of connections,
    // each opened before its first request vouches for it.
    config.connections = Connections::new(usize::MAX, usize::MAX, config.connections.idle);
    config
}

/// `--serve DB`: run a relay on the database, print its URL, stop at EOF on stdin.
async fn serve_child(db: &str) {
    let running = server::spawn(unlimited(db.into()))
        .await
        .expect("relay starts");
    println!("{}", running.url());
    let mut rest = String::new();
    let _ = tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut rest)).await;
    running.stop().await.expect("relay stops");
}

#[tokio::main]
async fn main() {
    if let Some(db) = std::env::args().skip_while(|a| a != "--serve").nth(1) {
        return serve_child(&db).await;
    }
    if std::env::args().any(|a| a == "--scan") {
        return secret_scan();
    }
    let seconds = flag("--seconds").unwrap_or(5.0);
    let subscribers = flag("--subscribers").unwrap_or(1000.0) as usize;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("relay.db");
    let running = server::spawn(unlimited(db)).await.expect("relay starts");
    let mut tokens = Vec::new();
    for n in 0..=CLIENTS {
        let added = running
            .state
            .relay
            .team()
            .add(&format!("agent{n}"), Some(&format!("Agent {n}")))
            .await
            .expect("add person");
        tokens.push(added.token.expose().to_owned());
    }
    let url = running.url();
    let relay = running.state.relay.clone();
    let http = reqwest::Client::new();
    let healthz = format!("{url}/healthz");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "crosstalk benchmark: release build, {cores} cores, loopback HTTP/1.1, clients in-process"
    );

    // Baseline round trip.
    let mut round_trip = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        http.get(&healthz)
            .send()
            .await
            .expect("healthz")
            .bytes()
            .await
            .expect("body");
        round_trip.push(started.elapsed());
    }

    println!("\npost-to-wake ({ROUNDS} rounds each)");
    let baseline = line("baseline: GET /healthz round trip", &mut round_trip);
    let waiter = Arc::new(connect(&url, &tokens[0]).await);
    let sender = Arc::new(connect(&url, &tokens[1]).await);
    let mut mcp = post_to_wake(
        &relay,
        |_| {
            let waiter = waiter.clone();
            async move { call(&waiter, "check_inbox", json!({ "timeout_seconds": 50 })).await }
        },
        |round| {
            let sender = sender.clone();
            async move {
                call(
                    &sender,
                    "send_message",
                    json!({ "to": "agent0", "body": format!("ping {round}") }),
                )
                .await;
            }
        },
    )
    .await;
    let mcp = line("MCP: check_inbox woken by send_message", &mut mcp);
    let mut rest = post_to_wake(
        &relay,
        |_| {
            let (http, url, token) = (http.clone(), url.clone(), tokens[0].clone());
            async move {
                let response = http
                    .get(format!("{url}/api/inbox?timeout_s=50"))
                    .bearer_auth(token)
                    .send()
                    .await;
                response.expect("inbox").json().await.expect("inbox JSON")
            }
        },
        |round| {
            let (http, url, token) = (http.clone(), url.clone(), tokens[1].clone());
            async move {
                let body = json!({ "to": "agent0", "body": format!("ping {round}") });
                let response = http
                    .post(format!("{url}/api/messages"))
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await;
                assert_eq!(response.expect("send").status(), 201);
            }
        },
    )
    .await;
    let rest = line(
        "REST: GET /api/inbox woken by POST /api/messages",
        &mut rest,
    );
    ratio("ratio MCP / baseline", mcp, baseline);
    ratio("ratio REST / baseline", rest, baseline);

    // Push: from a send to its notification on a session listening with
    // `?push=1`, beside the send alone (its commit acknowledged).
    println!("\npush to a listening MCP session ({PUSH_ROUNDS} sends)");
    let (committed, pushed) = push_latency(&relay, &url, &tokens).await;
    let (mut committed, mut pushed) = (committed, pushed);
    let committed = line(
        "baseline: the send, until its commit is acknowledged",
        &mut committed,
    );
    let pushed = line("send to notifications/claude/channel arriving", &mut pushed);
    ratio("ratio push / commit", pushed, committed);

    println!("\nsend throughput: {CLIENTS} concurrent clients, {seconds} s each");
    let trivial = throughput(seconds, {
        let (http, healthz) = (http.clone(), healthz.clone());
        move |_| {
            let (http, healthz) = (http.clone(), healthz.clone());
            async move {
                http.get(&healthz)
                    .send()
                    .await
                    .expect("healthz")
                    .bytes()
                    .await
                    .expect("body");
            }
        }
    })
    .await;
    println!(
        "  {:<46} {trivial:>9.0} requests/s",
        "baseline: GET /healthz"
    );
    let rest = throughput(seconds, {
        let (http, url, tokens) = (http.clone(), url.clone(), tokens.clone());
        move |n| {
            let (http, url, token) = (http.clone(), url.clone(), tokens[n + 1].clone());
            async move {
                let body = json!({ "to": "agent0", "body": "status update: build 1234 passed" });
                let response = http
                    .post(format!("{url}/api/messages"))
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await;
                assert_eq!(response.expect("send").status(), 201);
            }
        }
    })
    .await;
    println!(
        "  {:<46} {rest:>9.0} messages/s  ({:.2} of baseline)",
        "REST: POST /api/messages",
        rest / trivial
    );
    let mut clients = Vec::new();
    for token in &tokens[1..] {
        clients.push(connect(&url, token).await);
    }
    let clients = Arc::new(clients);
    let mcp = throughput(seconds, {
        let clients = clients.clone();
        move |n| {
            let clients = clients.clone();
            async move {
                let body = json!({ "to": "agent0", "body": "status update: build 1234 passed" });
                call(&clients[n], "send_message", body).await;
            }
        }
    })
    .await;
    println!(
        "  {:<46} {mcp:>9.0} messages/s  ({:.2} of baseline)",
        "MCP: send_message (rmcp client)",
        mcp / trivial
    );
    let mut callers = Vec::new();
    for token in &tokens[1..] {
        callers.push(
            relay
                .authenticate(Some(token))
                .await
                .expect("a known token"),
        );
    }
    let callers = Arc::new(callers);
    let core = throughput(seconds, {
        let relay = relay.clone();
        move |n| {
            let relay = relay.clone();
            let caller = callers[n].clone();
            async move {
                let message = DirectMessage {
                    to: "agent0".into(),
                    content: Content::text("status update: build 1234 passed".into(), None),
                    ..DirectMessage::default()
                };
                relay.send_direct(&caller, message).await.expect("send");
            }
        }
    })
    .await;
    println!(
        "  {:<46} {core:>9.0} messages/s",
        "core alone, no HTTP (store + group commit)"
    );

    running.stop().await.expect("relay stops");

    secret_scan();

    println!("\nfan-out of one channel post to SSE subscribers (relay in a child process)");
    let mut child = std::process::Command::new(std::env::current_exe().expect("this binary"))
        .args(["--serve", &dir.path().join("relay.db").to_string_lossy()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("child relay starts");
    let mut child_url = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("child stdout")),
        &mut child_url,
    )
    .expect("child prints its URL");
    let child_url = child_url.trim();
    let mut single = Vec::new();
    for _ in 0..100 {
        single.extend(fan_out(&http, child_url, &tokens, 1, child.id()).await.0);
    }
    let one = line("baseline: 1 subscriber (100 posts)", &mut single);
    let (mut many, per_subscriber_kib) =
        fan_out(&http, child_url, &tokens, subscribers, child.id()).await;
    let all = line(
        &format!("{subscribers} subscribers, time until each has it"),
        &mut many,
    );
    ratio(&format!("ratio {subscribers} / 1"), all, one);
    println!(
        "  {:<46} {per_subscriber_kib:>7.1} KiB",
        "relay's resident memory per idle subscriber"
    );
    drop(child.stdin.take());
    child.wait().expect("child relay stops");
}

/// Scanning a 64 KiB message for secrets: prose, code full of assignments,
/// and a base64 blob (long runs of token characters), each beside a baseline
/// pass over the same bytes (`str::contains` of a string that is not there).
fn secret_scan() {
    use crosstalk::relay::secrets::find_secret;
    const SIZE: usize = 64 * 1024;
    // 64 KiB, cut at a character boundary.
    let fill = |unit: &str| {
        let long = unit.repeat(SIZE / unit.len() + 1);
        let mut end = SIZE;
        while !long.is_char_boundary(end) {
            end -= 1;
        }
        long[..end].to_owned()
    };
    let texts = [
        (
            "prose",
            fill("Which migration renamed users.email? The rollback plan needs it before Friday. "),
        ),
        (
            "code",
            fill(
                "let retries = config.retries; timeout: 30, key = value_of(name); password: <redacted>\n",
            ),
        ),
        (
            "base64 blob",
            fill("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"),
        ),
        ("Latin-1 (é)", fill("é")),
        ("CJK", fill("数据库迁移已完成")),
        ("fullwidth (needs NFKC)", fill("ＡＢＣ１２３ｘｙｚ　")),
        (
            "mixed non-ASCII prose",
            fill("Le café est prêt — データベースの移行は完了しました。 "),
        ),
    ];
    println!("\nsecret scan of a 64 KiB message ({ROUNDS} runs each)");
    // Linear in size: the same text at 16, 32 and 64 KiB.
    let prose = fill("Le café est prêt — データベースの移行は完了しました。 password: incorrect ");
    let mut at = Vec::new();
    for size in [16 * 1024, 32 * 1024, 64 * 1024] {
        let mut end = size;
        while !prose.is_char_boundary(end) {
            end -= 1;
        }
        let text = &prose[..end];
        let mut runs: Vec<Duration> = (0..ROUNDS)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(find_secret(std::hint::black_box(text)));
                started.elapsed()
            })
            .collect();
        at.push(line(
            &format!("find_secret, mixed text, {} KiB", size / 1024),
            &mut runs,
        ));
    }
    ratio("  64 KiB against 16 KiB (linear: about 4)", at[2], at[0]);
    for (name, text) in &texts {
        assert_eq!(find_secret(text), None, "{name} is harmless");
        let mut scan = Vec::with_capacity(ROUNDS);
        let mut baseline = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let started = Instant::now();
            std::hint::black_box(find_secret(std::hint::black_box(text)));
            scan.push(started.elapsed());
            let started = Instant::now();
            std::hint::black_box(std::hint::black_box(text).contains("not-in-the-text"));
            baseline.push(started.elapsed());
        }
        let of = line(&format!("find_secret, {name}"), &mut scan);
        let to = line(
            "  baseline: str::contains over the same bytes",
            &mut baseline,
        );
        ratio("  ratio", of, to);
    }
}

/// Opens `count` streams on a fresh channel, posts once, and times delivery
/// to each. Also returns the resident memory each idle stream added.
async fn fan_out(
    http: &reqwest::Client,
    url: &str,
    tokens: &[String],
    count: usize,
    relay_pid: u32,
) -> (Vec<Duration>, f64) {
    static CHANNEL: AtomicU64 = AtomicU64::new(0);
    let channel = format!("fanout{}", CHANNEL.fetch_add(1, Ordering::Relaxed));
    let before = resident_kib(relay_pid);
    let opened = join_all((0..count).map(|n| {
        let request = http
            .get(format!("{url}/api/channels/{channel}/stream"))
            .bearer_auth(&tokens[n % tokens.len()]);
        async move {
            let mut response = request.send().await.expect("stream opens");
            // The first event is the notice: the stream is subscribed.
            let mut seen = String::new();
            while !seen.contains("\n\n") {
                seen.push_str(
                    std::str::from_utf8(&response.chunk().await.expect("chunk").expect("open"))
                        .expect("utf-8"),
                );
            }
            response
        }
    }))
    .await;
    let per_subscriber = resident_kib(relay_pid).saturating_sub(before) as f64 / count as f64;
    let started = Arc::new(std::sync::OnceLock::<Instant>::new());
    let readers: Vec<_> = opened
        .into_iter()
        .map(|mut response| {
            let started = started.clone();
            tokio::spawn(async move {
                let mut seen = String::new();
                while !seen.contains("event: message") {
                    seen.push_str(
                        std::str::from_utf8(&response.chunk().await.expect("chunk").expect("open"))
                            .expect("utf-8"),
                    );
                }
                started.get().expect("posted").elapsed()
            })
        })
        .collect();
    let _ = started.set(Instant::now());
    let body = json!({ "body": "release 1.4 is tagged" });
    let response = http
        .post(format!("{url}/api/channels/{channel}/messages"))
        .bearer_auth(&tokens[0])
        .json(&body)
        .send()
        .await;
    assert_eq!(response.expect("post").status(), 201);
    let mut delays = Vec::with_capacity(count);
    for reader in readers {
        delays.push(reader.await.expect("reader"));
    }
    (delays, per_subscriber)
}
