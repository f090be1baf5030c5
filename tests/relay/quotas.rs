//! Quotas an attacker cannot turn against the team, cross-site protection,
//! and what every signed-in or refused answer looks like.

use crate::support::{
    RawSession, get, http, post, rest, spawn_app, spawn_app_with, spawn_app_with_flags,
};
use crosstalk::config::Rate;
use crosstalk::host::{Cidr, Origin};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn a_flood_of_bad_tokens_from_an_address_never_refuses_its_valid_user() {
    let app = spawn_app_with(|config| config.limits.per_address = Rate::new(2, 4)).await;
    let alice = app.add_person("alice").await;
    let people = format!("{}/api/people", app.url());
    let flood: Vec<_> = (0..40)
        .map(|n| {
            http()
                .get(&people)
                .bearer_auth(format!("xtalk_guess{n}"))
                .send()
        })
        .collect();
    let valid: Vec<_> = (0..14)
        .map(|_| http().get(&people).bearer_auth(&alice).send())
        .collect();
    let (flooded, served) = tokio::join!(
        futures::future::join_all(flood),
        futures::future::join_all(valid)
    );
    let refused = flooded
        .iter()
        .filter(|r| r.as_ref().unwrap().status() == 429)
        .count();
    assert!(
        refused >= 30,
        "the flood was limited ({refused} of 40 refused)"
    );
    for response in served {
        assert_eq!(
            response.unwrap().status(),
            200,
            "a valid request was refused"
        );
    }
}

#[tokio::test]
async fn forwarded_addresses_count_only_from_trusted_proxies() {
    let behind_proxy = spawn_app_with(|config| {
        config.limits.per_address = Rate::new(1, 2);
        config.trusted_proxies = vec![Cidr::parse("127.0.0.1/32").unwrap()];
    })
    .await;
    let from = |app: &crate::support::TestApp, client: &str| {
        http()
            .get(format!("{}/api/people", app.url()))
            .bearer_auth("xtalk_guess")
            .header("x-forwarded-for", format!("{client}, 127.0.0.1"))
            .send()
    };
    for _ in 0..2 {
        assert_eq!(
            from(&behind_proxy, "203.0.113.5").await.unwrap().status(),
            401
        );
    }
    assert_eq!(
        from(&behind_proxy, "203.0.113.5").await.unwrap().status(),
        429
    );
    // Another client behind the same proxy has a quota of its own.
    assert_eq!(
        from(&behind_proxy, "203.0.113.6").await.unwrap().status(),
        401
    );

    // From a peer that is not trusted, the header is ignored.
    let direct = spawn_app_with(|config| config.limits.per_address = Rate::new(1, 2)).await;
    for _ in 0..2 {
        assert_eq!(from(&direct, "203.0.113.5").await.unwrap().status(), 401);
    }
    assert_eq!(from(&direct, "203.0.113.6").await.unwrap().status(), 429);
}

#[tokio::test]
async fn behind_a_forwarded_only_proxy_a_clients_own_xff_chooses_nothing() {
    let app = spawn_app_with(|config| {
        config.limits.per_address = Rate::new(1, 2);
        config.trusted_proxies = vec![Cidr::parse("127.0.0.1/32").unwrap()];
        config.forwarded_header = crosstalk::host::ForwardedHeader::Forwarded;
    })
    .await;
    // The proxy appends `Forwarded: for=` the client; the client's own
    // X-Forwarded-For, a new address each time, passes through it.
    let mut statuses = Vec::new();
    for n in 0..4 {
        let status = http()
            .get(format!("{}/api/people", app.url()))
            .bearer_auth("xtalk_guess")
            .header("x-forwarded-for", format!("198.51.100.{n}"))
            .header("forwarded", "for=203.0.113.5")
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        statuses.push(status);
    }
    assert_eq!(
        statuses,
        [401, 401, 429, 429],
        "counted against 203.0.113.5"
    );
}

#[tokio::test]
async fn a_person_past_their_daily_bytes_gets_429_and_nothing_is_stored() {
    let app = spawn_app_with(|config| config.settings.max_bytes_per_day = 100).await;
    let alice = app.add_person("alice").await;
    let body = "x".repeat(60);
    let (status, _) = post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": body }),
    )
    .await;
    assert_eq!(status, 201);
    let (status, refused) = post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": body }),
    )
    .await;
    assert_eq!(status, 429);
    assert_eq!(refused["error"]["code"], "rate_limited");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("one person may send 100 a day (RELAY_MAX_BYTES_PER_DAY)"),
        "{refused}"
    );
    assert_eq!(app.rest(&alice).stored_messages().await, 1);

    // What else a person has kept counts too: an approval's texts (kept a
    // week), against a day's bytes of their own, so approvals and messages
    // never keep each other out; and a file's name and type beside its
    // bytes.
    let app = spawn_app_with(|config| config.settings.max_bytes_per_day = 100).await;
    let bob = app.add_person("bob").await;
    let ask = |n: u32| {
        json!({"request_id": format!("ask{n}"), "tool_name": "Bash",
               "description": "d".repeat(60), "input_preview": "ls"})
    };
    let (status, asked) = post(&app, "/api/approvals", &bob, ask(1)).await;
    assert_eq!(status, 201, "{asked}");
    let (status, refused) = post(&app, "/api/approvals", &bob, ask(2)).await;
    assert_eq!(status, 429, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the approvals asked of bob today hold 70 bytes"),
        "{refused}"
    );
    assert_eq!(app.count("SELECT count(*) FROM approvals"), 1);
    let (status, _) = post(
        &app,
        "/api/channels/ops/messages",
        &bob,
        json!({ "body": "x" }),
    )
    .await;
    assert_eq!(status, 201, "messages have the day's bytes of their own");
    let file =
        json!({ "name": "n".repeat(100), "content_type": "text/plain", "data_base64": "eA==" });
    let (status, refused) = post(
        &app,
        "/api/channels/ops/messages",
        &bob,
        json!({ "body": "x", "attachments": [file] }),
    )
    .await;
    assert_eq!(status, 429, "{refused}");
}

const SHARED: &str = "shared-token-0123456789abcdefghijklmn";

#[tokio::test]
async fn the_shared_token_names_a_bounded_number_of_senders() {
    let app = spawn_app_with_flags(&["--token", SHARED, "--max-shared-senders", "2"]).await;
    let as_sender = |sender: &str| {
        post(
            &app,
            "/api/channels/ops/messages",
            SHARED,
            json!({ "body": "build passed", "sender": sender }),
        )
    };
    assert_eq!(as_sender("ci").await.0, 201);
    assert_eq!(as_sender("deploy").await.0, 201);
    let (status, body) = as_sender("third").await;
    assert_eq!(status, 403);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the shared token has already named 2 different senders")
    );
    assert_eq!(as_sender("ci").await.0, 201, "a name it used stays usable");
}

#[tokio::test]
async fn presence_of_nobodys_handles_expires_with_retention() {
    let app = spawn_app_with_flags(&["--token", SHARED]).await;
    // While nobody is on the team, the shared token may name anyone.
    let ghost = json!({ "status": "deploying", "sender": "ghost" });
    let (status, _) = app.rest(SHARED).put("/api/status", ghost).await;
    assert_eq!(status, 200);
    let alice = app.add_person("alice").await;
    let mine = json!({ "status": "reviewing" });
    let (status, _) = app.rest(&alice).put("/api/status", mine).await;
    assert_eq!(status, 200);
    // Both quiet for longer than messages live (what memory held of them
    // written first, so nothing newer comes after).
    app.running.state.relay.flush_presence().await.unwrap();
    app.sql(
        "UPDATE presence SET status_at = 1, last_seen_at = 1",
        |c, q| c.execute(q, []).unwrap(),
    );
    app.running.state.relay.purge_expired().await.unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM presence WHERE handle = 'ghost'"),
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM presence WHERE handle = 'alice'"),
        1
    );
}

#[tokio::test]
async fn basic_credentials_from_another_site_are_refused_and_signed_in_answers_are_not_cached() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let url = app.url();
    for path in ["/api/people", "/api/channels/ops/stream", "/"] {
        for site in ["cross-site", "same-site"] {
            let response = http()
                .get(format!("{url}{path}"))
                .basic_auth("alice", Some(&alice))
                .header("sec-fetch-site", site)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 403, "{path} from {site}");
        }
        let own = http()
            .get(format!("{url}{path}"))
            .basic_auth("alice", Some(&alice))
            .header("sec-fetch-site", "same-origin")
            .send()
            .await
            .unwrap();
        assert_eq!(own.status(), 200, "{path} from the relay's own page");
        assert_eq!(own.headers()["cache-control"], "no-store", "{path}");
    }
    let signed_in = http()
        .get(format!("{url}/api/people"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.headers()["cache-control"], "no-store");
    // A Bearer token is never attached by a browser on its own.
    let bearer = http()
        .get(format!("{url}/api/people"))
        .bearer_auth(&alice)
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
}

#[tokio::test]
async fn cors_lets_an_allowed_origin_call_the_api_with_bearer_only() {
    let app = spawn_app_with(|config| {
        config.allowed_origins = vec![Origin::parse("https://app.example.com").unwrap()];
    })
    .await;
    let alice = app.add_person("alice").await;
    let people = format!("{}/api/people", app.url());
    let preflight = http()
        .request(Method::OPTIONS, &people)
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://app.example.com"
    );
    assert!(
        headers["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization")
    );
    assert!(!headers.contains_key("access-control-allow-credentials"));

    let call = http()
        .get(&people)
        .header("origin", "https://app.example.com")
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(call.status(), 200);
    assert_eq!(
        call.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );

    let foreign = http()
        .request(Method::OPTIONS, &people)
        .header("origin", "https://evil.example.net")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert!(
        !foreign
            .headers()
            .contains_key("access-control-allow-origin")
    );
}

#[tokio::test]
async fn statuses_and_type_labels_are_scanned_and_invisible_characters_refused() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let token = crosstalk::model::Token::generate();
    let (status, body) = rest(
        &app,
        Method::PUT,
        "/api/status",
        Some(&alice),
        Some(json!({ "status": format!("use {}", token.expose()) })),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(!body.to_string().contains(&token.expose()[6..]));
    let (status, _) = post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "hello", "type": "AKIAIOSFODNN7EXAMPLE" }),
    )
    .await;
    assert_eq!(status, 422);
    for hidden in ["approved\u{202E}lanif", "DONE\u{200B}"] {
        let (status, _) = rest(
            &app,
            Method::PUT,
            "/api/status",
            Some(&alice),
            Some(json!({ "status": hidden })),
        )
        .await;
        assert_eq!(status, 400, "{hidden:?}");
        let (status, _) = post(
            &app,
            "/api/channels/ops/messages",
            &alice,
            json!({ "body": "hello", "type": hidden }),
        )
        .await;
        assert_eq!(status, 400, "{hidden:?}");
    }
    assert_eq!(app.rest(&alice).stored_messages().await, 0);
    let (_, people) = app.rest(&alice).get("/api/people").await;
    assert_eq!(people["peers"][0]["status"], "", "{people}");
    // Display names are held to the same rules: teammates see them too.
    let team = app.running.state.relay.team();
    for (name, refused) in [
        ("Bob\u{202E}nimda".to_owned(), "invisible characters"),
        (format!("Bob {}", token.expose()), "a crosstalk token"),
    ] {
        let error = team.add("bob", Some(&name)).await.unwrap_err().to_string();
        assert!(error.contains(refused), "{name:?}: {error}");
    }
    let (_, people) = app.rest(&alice).get("/api/people").await;
    assert_eq!(people["peers"].as_array().unwrap().len(), 1, "{people}");

    // In a body they are stored as sent, and the page shows them.
    let (status, _) = post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "invoice\u{202E}fdp.exe" }),
    )
    .await;
    assert_eq!(status, 201);
    let page = http()
        .get(format!("{}/channels/ops", app.url()))
        .basic_auth("alice", Some(&alice))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("invoice[U+202E]fdp.exe"), "{page}");
    assert!(!page.contains('\u{202E}'));
}

#[tokio::test]
async fn refusals_from_the_protocol_layers_speak_the_json_error_shape() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let url = app.url();
    let session = RawSession::open(&url, &alice).await;
    let mut lost = RawSession::open(&url, &alice).await;
    lost.id = "no-such-session".into();
    // Each in the words that say what to change: MCP's for a lost session,
    // rmcp's own for what it checked.
    let cases = [
        (
            lost.call(2, "list_peers", json!({})),
            404,
            "not_found",
            "this MCP session does not exist: it ended or went idle; start a new one",
        ),
        (
            http()
                .post(format!("{url}/mcp"))
                .bearer_auth(&alice)
                .header("accept", "text/plain")
                .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" })),
            406,
            "not_acceptable",
            "text/event-stream",
        ),
        (
            session.post(json!({})).header("content-type", "text/plain"),
            415,
            "unsupported_media_type",
            "application/json",
        ),
    ];
    let wrong_method = http()
        .delete(format!("{url}/api/people"))
        .bearer_auth(&alice);
    let cases = cases
        .into_iter()
        .chain([(wrong_method, 405, "method_not_allowed", "")]);
    for (request, status, code, words) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.expect("a JSON error body");
        assert_eq!(body["error"]["code"], code, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty() && message.contains(words), "{body}");
    }
    assert_eq!(get(&app, "/api/people", &alice).await.0, 200);
}
