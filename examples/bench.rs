//! Benchmarks of a real relay over real HTTP on loopback.
//!
//! Run with `cargo run --release --example bench` (add `-- --seconds 10` for
//! longer throughput runs). Every figure is printed beside a baseline measured
//! in the same run against a trivial endpoint of the same server stack
//! (`GET /healthz`), so the ratio holds on a noisy machine.
//!
//! - post-to-wake: one agent waits in `check_inbox`; another sends it a
//!   message; the time from the start of the send until the waiting call
//!   returns with the message. Baseline: one `/healthz` round trip.
//! - send throughput: 32 clients sending direct messages as fast as the relay
//!   answers, for a fixed time. Baseline: 32 clients calling `/healthz`.

use crosstalk::app;
use crosstalk::config::Config;
use crosstalk::relay::{Caller, DirectMessage, handle::Handle, now_millis, token::Token};
use crosstalk::store::{SqliteStore, Store};
use rmcp::{
    RoleClient, ServiceExt,
    model::CallToolRequestParams,
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

const CLIENTS: usize = 32;
const ROUNDS: usize = 300;

type Client = RunningService<RoleClient, ()>;

async fn connect(url: &str, token: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")).auth_header(token),
    );
    ().serve(transport).await.expect("connect")
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> Value {
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .expect("tool call");
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    result.structured_content.expect("structured result")
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Runs `work` from `CLIENTS` tasks for `seconds`; returns operations a second.
async fn throughput<F, Fut>(seconds: f64, work: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
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

#[tokio::main]
async fn main() {
    let seconds: f64 = std::env::args()
        .skip_while(|a| a != "--seconds")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("relay.db");
    let store = SqliteStore::open(&db).expect("store");
    let mut tokens = Vec::new();
    for n in 0..=CLIENTS {
        let token = Token::generate();
        store
            .add_person(
                &format!("agent{n}"),
                &format!("Agent {n}"),
                token.hash(),
                now_millis(),
            )
            .await
            .expect("add person");
        tokens.push(token.expose().to_owned());
    }
    drop(store);
    let running = app::spawn(Config::local(db)).await.expect("relay starts");
    let url = running.url();
    let relay = running.state.relay.clone();
    let http = reqwest::Client::new();
    let healthz = format!("{url}/healthz");

    println!(
        "crosstalk benchmark: release build, {} cores, loopback HTTP/1.1",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Post-to-wake latency over MCP.
    let waiter = Arc::new(connect(&url, &tokens[0]).await);
    let sender = connect(&url, &tokens[1]).await;
    let mut parked = relay.parked_waits();
    let mut wake = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let before = *parked.borrow_and_update();
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                call(&waiter, "check_inbox", json!({ "timeout_seconds": 50 })).await
            })
        };
        parked
            .wait_for(|n| *n > before)
            .await
            .expect("relay running");
        let started = Instant::now();
        call(
            &sender,
            "send_message",
            json!({ "to": "agent0", "body": format!("ping {round}") }),
        )
        .await;
        let inbox = waiting.await.expect("waiter");
        wake.push(started.elapsed());
        assert_eq!(inbox["messages"][0]["body"], format!("ping {round}"));
    }
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
    let (wake50, wake99) = (percentile(&mut wake, 0.5), percentile(&mut wake, 0.99));
    let (rt50, rt99) = (
        percentile(&mut round_trip, 0.5),
        percentile(&mut round_trip, 0.99),
    );
    println!("\npost-to-wake over MCP ({ROUNDS} rounds)");
    println!(
        "  crosstalk check_inbox woken by send_message   p50 {}  p99 {}",
        ms(wake50),
        ms(wake99)
    );
    println!(
        "  baseline GET /healthz round trip              p50 {}  p99 {}",
        ms(rt50),
        ms(rt99)
    );
    println!(
        "  ratio                                         p50 {:.1}x  p99 {:.1}x",
        wake50.as_secs_f64() / rt50.as_secs_f64(),
        wake99.as_secs_f64() / rt99.as_secs_f64()
    );

    // Send throughput, 32 MCP clients.
    let mut clients = Vec::new();
    for token in &tokens[1..] {
        clients.push(connect(&url, token).await);
    }
    let clients = Arc::new(clients);
    let sends = throughput(seconds, {
        let clients = clients.clone();
        move |n| {
            let clients = clients.clone();
            async move {
                call(
                    &clients[n],
                    "send_message",
                    json!({ "to": "agent0", "body": "status update: build 1234 passed" }),
                )
                .await;
            }
        }
    })
    .await;
    // Raw HTTP JSON-RPC on sessions opened by hand (no rmcp client).
    let mut sessions = Vec::new();
    for token in &tokens[1..] {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}});
        let r = http
            .post(format!("{url}/mcp"))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap();
        let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        r.bytes().await.unwrap();
        let r = http
            .post(format!("{url}/mcp"))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .send()
            .await
            .unwrap();
        r.bytes().await.unwrap();
        sessions.push((token.clone(), sid));
    }
    let sessions = Arc::new(sessions);
    let raw = throughput(seconds, {
        let (http, url, sessions) = (http.clone(), url.clone(), sessions.clone());
        move |n| {
            let (http, url, sessions) = (http.clone(), url.clone(), sessions.clone());
            async move {
                let (token, sid) = &sessions[n];
                static NEXT: AtomicU64 = AtomicU64::new(10);
                let id = NEXT.fetch_add(1, Ordering::Relaxed);
                let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"agent0","body":"status update: build 1234 passed"}}});
                let r = http.post(format!("{url}/mcp")).bearer_auth(token).header("accept","application/json, text/event-stream").header("mcp-session-id", sid).header("mcp-protocol-version","2025-06-18").json(&body).send().await.unwrap();
                r.bytes().await.unwrap();
            }
        }
    }).await;
    println!("  raw session POST: {raw:.0}");
    let baseline = throughput(seconds, {
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
    let core = throughput(seconds, {
        let relay = relay.clone();
        move |n| {
            let relay = relay.clone();
            async move {
                let caller = Caller::Person(Handle::parse(&format!("agent{}", n + 1)).unwrap());
                let message = DirectMessage {
                    to: "agent0".into(),
                    body: "status update: build 1234 passed".into(),
                    ..DirectMessage::default()
                };
                relay.send_direct(&caller, message).await.expect("send");
            }
        }
    })
    .await;
    println!("\nsend throughput, {CLIENTS} concurrent clients, {seconds} s each");
    println!("  the core alone (no HTTP): send_direct  {core:>9.0} messages/s");
    println!("  crosstalk send_message over MCP    {sends:>9.0} messages/s");
    println!("  baseline GET /healthz              {baseline:>9.0} requests/s");
    println!(
        "  ratio                              {:>9.2}",
        sends / baseline
    );

    running.stop().await.expect("relay stops");
}
