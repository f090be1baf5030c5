//! The metrics listener: off unless asked for, never on the public
//! listener, its exposition read by a Prometheus parser (not a regex), its
//! counters moving as people send, are refused, wait and are pushed to, and
//! no label value taken from what anyone sent.

use crate::support::*;
use serde_json::json;
use std::net::SocketAddr;

const MARKERS: [&str; 3] = ["markerhandleqz", "markerchannelqz", "markerbodyqz"];

async fn scrape(addr: SocketAddr) -> (String, prometheus_parse::Scrape) {
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
fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
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
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut named = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (at, _) in expr.match_indices("crosstalk_") {
                let name: String = expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let family = ["_total", "_bucket"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name);
                assert!(
                    text.contains(&format!("# TYPE {family} ")),
                    "the dashboard's {name} is not served"
                );
                named += 1;
            }
        }
    }
    assert!(named >= 15, "{named}");
}
