//! The metrics listener: off unless asked for, never on the public
//! listener, its exposition read by a Prometheus parser (not a regex), its
//! counters moving as people send, are refused, wait and are pushed to, and
//! no label value taken from what anyone sent.

use crate::support::*;
use serde_json::json;
use std::{net::SocketAddr, time::Duration};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MARKERS: [&str; 3] = ["markerhandleqz", "markerchannelqz", "markerbodyqz"];

pub async fn scrape(addr: SocketAddr) -> (String, prometheus_parse::Scrape) {
    let response = http()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("the exposition parses");
    (text, parsed)
}

/// The value of the sample `name` whose labels include `labels` (0 if none).
pub fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            prometheus_parse::Value::Summary(_) => 0.0,
        })
        .sum()
}

#[tokio::test]
async fn metrics_are_off_by_default_and_never_on_the_public_listener() {
    let app = spawn_app().await;
    assert_eq!(app.running.metrics_addr, None);
    let public = http()
        .get(format!("{}/metrics", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    assert!(!public.text().await.unwrap().contains("crosstalk_"));

    let app = spawn_app_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let metrics = app.running.metrics_addr.expect("a metrics listener");
    assert!(metrics.ip().is_loopback());
    assert_ne!(metrics.port(), app.running.addr.port());
    let public = http()
        .get(format!("{}/metrics", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    let (_, parsed) = scrape(metrics).await;
    assert_eq!(value(&parsed, "crosstalk_connections_open", &[]), 0.0);

    // A bare port is served on loopback.
    let config = config_from_flags(
        tempfile::tempdir().unwrap().path().join("r.db"),
        &["--metrics-addr", "9187"],
    )
    .unwrap();
    assert_eq!(
        config.metrics_listen,
        Some("127.0.0.1:9187".parse().unwrap())
    );
    assert!(
        config_from_flags(
            tempfile::tempdir().unwrap().path().join("r.db"),
            &["--metrics-addr", "everywhere"],
        )
        .is_err()
    );
}

#[tokio::test]
async fn counters_move_as_people_send_are_refused_wait_and_are_pushed_to() {
    let app = spawn_app_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let metrics = app.running.metrics_addr.unwrap();
    let alice = app.add_person(MARKERS[0]).await;
    let bob = app.add_person("bob").await;
    let (_, before) = scrape(metrics).await;

    // A direct message and a channel post, both with markers everywhere.
    let (status, _) = post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": format!("hello {}", MARKERS[2]) }),
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = post(
        &app,
        &format!("/api/channels/{}/messages", MARKERS[1]),
        &alice,
        json!({ "body": format!("posted {}", MARKERS[2]) }),
    )
    .await;
    assert_eq!(status, 201);
    // A refused secret, and a refused empty body.
    let (status, _) = post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": format!("{} AKIAIOSFODNN7EXAMPLE", MARKERS[2]) }),
    )
    .await;
    assert_eq!(status, 422);
    let (status, _) = post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": " " }),
    )
    .await;
    assert_eq!(status, 400);

    // A wait that parks (bob's inbox taken first), woken by a send.
    let (status, _) = get(&app, "/api/inbox", &bob).await;
    assert_eq!(status, 200);
    let mut parked = app.running.state.relay.parked_waits();
    let was = *parked.borrow();
    let waiting = {
        let url = app.url();
        let bob = bob.clone();
        tokio::spawn(async move {
            http()
                .get(format!("{url}/api/inbox?timeout_s=30"))
                .bearer_auth(&bob)
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    parked.wait_for(|n| *n > was).await.unwrap();
    post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": "wake" }),
    )
    .await;
    assert_eq!(waiting.await.unwrap(), 200);

    // A push to bob's listening inbox stream.
    let stream = http()
        .get(format!("{}/api/inbox/stream", app.url()))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(stream);
    assert_eq!(stream.next().await.event.as_deref(), Some("notice"));
    post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": "pushed" }),
    )
    .await;
    let pushed = stream.message().await;
    assert_eq!(pushed["body"], "pushed");

    let (text, after) = scrape(metrics).await;
    let moved = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    assert_eq!(
        moved("crosstalk_messages_sent_total", &[("to", "direct")]),
        3.0
    );
    assert_eq!(
        moved("crosstalk_messages_sent_total", &[("to", "channel")]),
        1.0
    );
    assert_eq!(
        moved("crosstalk_messages_refused_total", &[("reason", "secret")]),
        1.0
    );
    assert_eq!(
        moved(
            "crosstalk_messages_refused_total",
            &[("reason", "bad_input")]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "crosstalk_messages_refused_secrets_total",
            &[("kind", "an AWS access key id")]
        ),
        1.0,
        "{text}"
    );
    assert!(moved("crosstalk_waits_parked_total", &[]) >= 1.0);
    assert!(moved("crosstalk_pushes_total", &[("offer", "first")]) >= 1.0);
    assert_eq!(value(&after, "crosstalk_listening_streams", &[]), 1.0);
    assert!(value(&after, "crosstalk_waits_open", &[]) >= 1.0);
    assert!(value(&after, "crosstalk_connections_open", &[]) >= 1.0);
    assert!(
        moved(
            "crosstalk_http_requests_total",
            &[("group", "api"), ("status", "201")]
        ) >= 4.0
    );
    assert!(
        value(
            &after,
            "crosstalk_http_request_duration_seconds",
            &[("group", "api")]
        ) >= 4.0
    );

    // Nothing anyone sent is a label, or anywhere in the exposition.
    for marker in MARKERS {
        assert!(!text.contains(marker), "{marker} is in the metrics");
    }
    for sample in &after.samples {
        for (label, value) in sample.labels.iter() {
            assert!(
                !MARKERS.iter().any(|m| value.contains(m)) && !value.contains("xtalk_"),
                "{}: {label}={value}",
                sample.metric
            );
        }
    }
}

#[tokio::test]
async fn the_dashboard_names_only_metrics_the_relay_serves() {
    let app = spawn_app_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    // One request, so the request families have samples.
    http()
        .get(format!("{}/healthz", app.url()))
        .send()
        .await
        .unwrap();
    let (text, _) = scrape(app.running.metrics_addr.unwrap()).await;
    let named = dashboard_families();
    for family in named
        .iter()
        .filter(|f| !f.starts_with("crosstalk_postgres_"))
    {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "the dashboard's {family} is not served"
        );
    }
    // PostgreSQL's own are held to a relay on PostgreSQL, in
    // instances::a_database_restart_is_survived_and_waiters_resync.
    assert!(named.len() >= 20, "{named:?}");
}

/// Every metric family the Grafana dashboard in deploy/ queries.
pub fn dashboard_families() -> std::collections::BTreeSet<String> {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut named = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (at, _) in expr.match_indices("crosstalk_") {
                let name: String = expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let family = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name);
                named.insert(family.to_owned());
            }
        }
    }
    named
}

/// The exposition read by the reference parser, Python's
/// `prometheus_client` (its OpenMetrics parser refuses what does not
/// conform: a histogram without its `+Inf` bucket or out of order, a
/// missing `# EOF`, a sample of no family): each family's type, and each
/// sample's name, labels and value.
fn parsed_strictly(text: &str) -> serde_json::Value {
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: python3 -m venv tests/clients/.venv with its requirements.txt (.ci/run \
         does it)",
        python.display()
    );
    let mut child = std::process::Command::new(python)
        .args([
            "-c",
            "import json, sys\n\
             from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
             print(json.dumps({f.name: {'type': f.type, 'samples': [[s.name, s.labels, s.value] \
             for s in f.samples]} for f in text_string_to_metric_families(sys.stdin.read())}))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the reference parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The value of `family`'s sample `name` whose labels include `labels`.
fn strict_value(
    parsed: &serde_json::Value,
    family: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> f64 {
    parsed[family]["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("{family} is not served"))
        .iter()
        .filter(|s| s[0] == name && labels.iter().all(|(k, v)| s[1][k] == *v))
        .map(|s| s[2].as_f64().unwrap())
        .sum()
}

#[tokio::test]
#[ignore = "needs the Python venv in tests/clients/.venv (.ci/run installs it); cargo test -- --ignored"]
async fn the_reference_parser_reads_the_exposition_and_the_store_and_quotas_count() {
    let app = spawn_app_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        config.limits.per_credential = crosstalk::config::Rate::new(1, 3);
    })
    .await;
    let metrics = app.running.metrics_addr.unwrap();
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (text, _) = scrape(metrics).await;
    let before = parsed_strictly(&text);

    // A message bob's agent claims (a read), and an MCP session held open.
    let (status, _) = post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": "are you there?" }),
    )
    .await;
    assert_eq!(status, 201);
    let (status, claimed) = get(&app, "/api/inbox", &bob).await;
    assert_eq!(
        (status, claimed["messages"].as_array().map(Vec::len)),
        (200, Some(1))
    );
    let session = app.mcp(&bob).await;
    // Alice's burst runs out (one request a second, three at once).
    let mut limited = 0;
    for _ in 0..6 {
        let (status, _) = get(&app, "/api/people", &alice).await;
        limited += u32::from(status == 429);
    }
    assert!(limited >= 1, "the quota never ran out");

    let (text, _) = scrape(metrics).await;
    let after = parsed_strictly(&text);
    let moved = |family: &str, name: &str, labels: &[(&str, &str)]| {
        strict_value(&after, family, name, labels) - strict_value(&before, family, name, labels)
    };
    for (family, kind) in [
        ("crosstalk_store_commit_writes", "histogram"),
        ("crosstalk_store_commit_duration_seconds", "histogram"),
        ("crosstalk_purge_duration_seconds", "histogram"),
        ("crosstalk_http_request_duration_seconds", "histogram"),
        ("crosstalk_mcp_sessions_open", "gauge"),
        ("crosstalk_rate_limited", "counter"),
        ("crosstalk_messages_read", "counter"),
    ] {
        assert_eq!(after[family]["type"], kind, "{family}");
    }
    assert!(
        moved(
            "crosstalk_store_commit_writes",
            "crosstalk_store_commit_writes_count",
            &[]
        ) >= 1.0
    );
    assert!(
        strict_value(
            &after,
            "crosstalk_store_commit_duration_seconds",
            "crosstalk_store_commit_duration_seconds_bucket",
            &[("le", "+Inf")]
        ) >= 1.0
    );
    // The purge ran once, at start.
    assert!(
        strict_value(
            &after,
            "crosstalk_purge_duration_seconds",
            "crosstalk_purge_duration_seconds_count",
            &[]
        ) >= 1.0
    );
    assert_eq!(
        moved(
            "crosstalk_messages_read",
            "crosstalk_messages_read_total",
            &[]
        ),
        1.0
    );
    assert_eq!(
        strict_value(
            &after,
            "crosstalk_mcp_sessions_open",
            "crosstalk_mcp_sessions_open",
            &[]
        ),
        1.0
    );
    // At least alice's (bob's MCP client, under the same quota, may have
    // met it too).
    assert!(
        moved(
            "crosstalk_rate_limited",
            "crosstalk_rate_limited_total",
            &[("quota", "credential")]
        ) >= f64::from(limited)
    );
    // SQLite has no pool and no listener: those are PostgreSQL's alone.
    assert!(after.get("crosstalk_postgres_pool_connections").is_none());
    drop(session);

    // A request is timed to the end of its body: a wait of a second takes
    // its second, and a stream is counted when it ends, not when it opens.
    let carol = app.add_person("carol").await;
    let (text, _) = scrape(metrics).await;
    let before = parsed_strictly(&text);
    let (status, _) = get(
        &app,
        "/api/channels/quiet/wait?since_id=0&timeout_s=1",
        &carol,
    )
    .await;
    assert_eq!(status, 200);
    let stream = http()
        .get(format!("{}/api/inbox/stream", app.url()))
        .bearer_auth(&carol)
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(stream);
    assert_eq!(stream.next().await.event.as_deref(), Some("notice"));
    let (text, _) = scrape(metrics).await;
    let open = parsed_strictly(&text);
    let duration = "crosstalk_http_request_duration_seconds";
    let moved = |from: &serde_json::Value, to: &serde_json::Value, sample: &str, group: &str| {
        strict_value(
            to,
            duration,
            &format!("{duration}_{sample}"),
            &[("group", group)],
        ) - strict_value(
            from,
            duration,
            &format!("{duration}_{sample}"),
            &[("group", group)],
        )
    };
    assert!(
        moved(&before, &open, "sum", "api") >= 1.0,
        "the wait's second"
    );
    assert_eq!(
        moved(&before, &open, "count", "api_stream"),
        0.0,
        "still open"
    );
    app.revoke("carol").await;
    stream.until_closed().await;
    let (text, _) = scrape(metrics).await;
    let closed = parsed_strictly(&text);
    assert_eq!(moved(&before, &closed, "count", "api_stream"), 1.0, "ended");
}

/// A relay with a metrics listener on loopback, its bounds as `adjust`
/// sets them.
async fn with_metrics(adjust: impl FnOnce(&mut crosstalk::config::Connections)) -> TestApp {
    spawn_app_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        adjust(&mut config.metrics_connections);
    })
    .await
}

/// Reads what `socket` is sent until the relay closes it, within 5 s (a
/// reset is a close too).
async fn read_until_closed(socket: &mut tokio::net::TcpStream, what: &str) -> String {
    let mut read = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut read)).await;
    assert!(closed.is_ok(), "{what}");
    String::from_utf8_lossy(&read).into_owned()
}

#[tokio::test]
async fn connections_held_open_on_the_metrics_listener_are_capped_and_leave_the_public_one_be() {
    // Connections held open there once took the descriptors the public
    // listener needed. Now it holds so many, closing its oldest idle one
    // for a newcomer, so a scraper still gets in.
    let app = with_metrics(|_| {}).await;
    let metrics = app.running.metrics_addr.unwrap();
    assert_eq!(
        app.running.state.config.metrics_connections.max,
        crosstalk::config::METRICS_CONNECTIONS
    );
    let mut held = Vec::new();
    for _ in 0..crosstalk::config::METRICS_CONNECTIONS {
        held.push(tokio::net::TcpStream::connect(metrics).await.unwrap());
    }
    let (_, parsed) = scrape(metrics).await;
    let reads = held.iter_mut().map(|socket| {
        Box::pin(async move {
            let mut byte = [0; 1];
            socket.read(&mut byte).await
        })
    });
    let (read, _, _) =
        tokio::time::timeout(Duration::from_secs(5), futures::future::select_all(reads))
            .await
            .expect("an idle connection is closed to make room");
    assert!(!matches!(read, Ok(n) if n > 0), "{read:?}");
    // None of them is the relay's: the public listener counts none, and
    // answers as ever.
    assert_eq!(value(&parsed, "crosstalk_connections_open", &[]), 0.0);
    let (status, body) = get(&app, "/healthz", "").await;
    assert_eq!((status, body), (200, json!({ "status": "ok" })));
}

#[tokio::test]
async fn the_metrics_listener_closes_a_connection_that_sends_no_whole_header() {
    let app = with_metrics(|bounds| bounds.header_read = Duration::from_millis(300)).await;
    let metrics = app.running.metrics_addr.unwrap();
    let mut slow = tokio::net::TcpStream::connect(metrics).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let answered = read_until_closed(&mut slow, "closed after the header timeout").await;
    assert!(!answered.contains("200 OK"), "{answered}");
}

#[tokio::test]
async fn the_metrics_listener_closes_a_connection_left_idle() {
    let app = with_metrics(|bounds| bounds.idle = Duration::from_millis(300)).await;
    let metrics = app.running.metrics_addr.unwrap();
    let mut kept = tokio::net::TcpStream::connect(metrics).await.unwrap();
    kept.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let answered = read_until_closed(&mut kept, "closed once idle after its scrape").await;
    assert!(answered.starts_with("HTTP/1.1 200 OK\r\n"), "{answered}");
}

#[tokio::test]
async fn the_metrics_listener_answers_only_for_its_own_address() {
    let app = with_metrics(|_| {}).await;
    let metrics = app.running.metrics_addr.unwrap();
    let port = metrics.port();
    let with_host = |host: String| {
        http()
            .get(format!("http://{metrics}/metrics"))
            .header("host", host)
            .send()
    };
    // DNS rebinding: a page's name pointed at the listener.
    let rebound = with_host(format!("evil.example:{port}")).await.unwrap();
    assert_eq!(rebound.status(), 403);
    let message = format!("this relay does not answer for \"evil.example\"; use http://{metrics}");
    assert_eq!(
        rebound.json::<serde_json::Value>().await.unwrap(),
        json!({ "error": { "code": "forbidden", "message": message } })
    );
    for own in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let answered = with_host(own.clone()).await.unwrap();
        assert_eq!(answered.status(), 200, "{own}");
    }
    let malformed = with_host(format!("127.0.0.1:{port}x")).await.unwrap();
    assert_eq!(malformed.status(), 400);
}
