//! Every route against every kind of credential and origin, with the exact
//! status each must get.

use crate::support::{http, spawn_app_with};
use base64::Engine as _;
use crosstalk::config::Limits;
use crosstalk::host::Origin;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;

/// How a request presents itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presents {
    Nothing,
    UnknownToken,
    RevokedToken,
    Bearer,
    Basic,
    QueryToken,
    ForeignOrigin,
    AllowedOrigin,
}

use Presents::*;

const ALL: [Presents; 8] = [
    Nothing,
    UnknownToken,
    RevokedToken,
    Bearer,
    Basic,
    QueryToken,
    ForeignOrigin,
    AllowedOrigin,
];

/// Which credentials a route accepts, by the contract.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `/mcp` and state-changing `/api` routes: Bearer only.
    Change,
    /// `/api` reads and the team page: Bearer or Basic.
    Read,
    /// SSE: Bearer, Basic or `?token=`.
    Stream,
    /// `/healthz`, `/readyz`: no credentials, no checks.
    Open,
    /// OAuth's metadata, registration, token and revocation: no
    /// credentials (any sent are ignored), but the Host and Origin checks.
    Anonymous,
    /// The page's hashed files and icon: public.
    Asset,
    /// Not on the public listener at all (the metrics have their own).
    Absent,
}

fn expected(kind: Kind, presents: Presents, success: u16) -> u16 {
    match (kind, presents) {
        (Kind::Open, _) => 200,
        (Kind::Absent, _) => 404,
        (_, ForeignOrigin) => 403,
        (Kind::Asset | Kind::Anonymous, _) => success,
        (_, Bearer | AllowedOrigin) => success,
        (Kind::Read | Kind::Stream, Basic) => success,
        (Kind::Stream, QueryToken) => success,
        _ => 401,
    }
}

/// A route of the matrix: method, the route as the router names it, a path
/// of it, body, kind, and the status on success. The routes and methods
/// are held equal to the router's own (`routes_in_the_router`).
type Row<'a> = (&'a str, &'a str, &'a str, Option<Value>, Kind, u16);

/// The routes the router has, as its source names them: every
/// `.route("…", …)` under `src/` with each method it is given there
/// (`get(…)`, `.post(…)`, …), and `.nest_service("…"` as the methods the
/// matrix sends it. A route whose path is not a literal fails the test.
pub fn routes_in_the_router() -> BTreeSet<(String, String)> {
    fn walk(dir: &Path, found: &mut BTreeSet<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (at, _) in text.match_indices(".route(") {
                let call = arguments(&text[at + ".route(".len()..]);
                let route = literal(call).unwrap_or_else(|| panic!("{path:?}: .route({call}"));
                for method in ["get", "post", "put", "delete", "patch"] {
                    let named = call.match_indices(&format!("{method}(")).any(|(i, _)| {
                        !call[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                    });
                    if named {
                        found.insert((method.to_uppercase(), route.clone()));
                    }
                }
            }
            for (at, _) in text.match_indices(".nest_service(") {
                let call = arguments(&text[at + ".nest_service(".len()..]);
                let route = literal(call).unwrap();
                found.insert(("POST".into(), route));
            }
        }
    }
    /// The arguments of a call, up to its closing parenthesis.
    fn arguments(text: &str) -> &str {
        let mut depth = 1;
        for (i, c) in text.char_indices() {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            if depth == 0 {
                return &text[..i];
            }
        }
        text
    }
    fn literal(call: &str) -> Option<String> {
        let quoted = call.trim_start().strip_prefix('"')?;
        Some(quoted.split('"').next()?.to_owned())
    }
    let mut found = BTreeSet::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    found
}

#[tokio::test]
async fn every_route_answers_every_credential_and_origin_with_the_contract_status() {
    let app = spawn_app_with(|config| {
        config.allowed_origins = vec![Origin::parse("https://app.example.com").unwrap()];
        config.limits = Limits {
            per_credential: None,
            per_address: None,
        };
    })
    .await;
    let alice = app.add_person("alice").await;
    let revoked = app.add_person("bob").await;
    app.revoke("bob").await;
    crate::support::post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "alice", "body": "a thread" }),
    )
    .await;
    crate::support::post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "a post" }),
    )
    .await;

    let initialize = crate::support::initialize();
    let css = crosstalk::web::ASSETS.css.path.clone();
    let routes: Vec<Row> = vec![
        ("POST", "/mcp", "/mcp", Some(initialize), Kind::Change, 200),
        (
            "GET",
            "/api/channels",
            "/api/channels",
            None,
            Kind::Read,
            200,
        ),
        (
            "GET",
            "/api/channels/{channel}/messages",
            "/api/channels/ops/messages",
            None,
            Kind::Read,
            200,
        ),
        (
            "POST",
            "/api/channels/{channel}/messages",
            "/api/channels/ops/messages",
            Some(json!({ "body": "hi" })),
            Kind::Change,
            201,
        ),
        (
            "GET",
            "/api/channels/{channel}/wait",
            "/api/channels/ops/wait?since_id=0&timeout_s=0",
            None,
            Kind::Read,
            200,
        ),
        (
            "GET",
            "/api/channels/{channel}/stream",
            "/api/channels/ops/stream",
            None,
            Kind::Stream,
            200,
        ),
        (
            "GET",
            "/api/threads/{id}/stream",
            "/api/threads/1/stream",
            None,
            Kind::Stream,
            200,
        ),
        (
            "POST",
            "/api/messages",
            "/api/messages",
            Some(json!({ "to": "alice", "body": "hi" })),
            Kind::Change,
            201,
        ),
        (
            "GET",
            "/api/messages/{id}",
            "/api/messages/1",
            None,
            Kind::Read,
            200,
        ),
        ("GET", "/api/inbox", "/api/inbox", None, Kind::Change, 200),
        (
            "POST",
            "/api/inbox/lease",
            "/api/inbox/lease",
            Some(json!({ "via": "wake" })),
            Kind::Change,
            200,
        ),
        (
            "GET",
            "/api/inbox/stream",
            "/api/inbox/stream",
            None,
            Kind::Change,
            200,
        ),
        (
            "GET",
            "/api/threads/{id}",
            "/api/threads/1",
            None,
            Kind::Read,
            200,
        ),
        ("GET", "/api/people", "/api/people", None, Kind::Read, 200),
        (
            "GET",
            "/api/search",
            "/api/search?q=thread",
            None,
            Kind::Read,
            200,
        ),
        (
            "PUT",
            "/api/status",
            "/api/status",
            Some(json!({ "status": "here" })),
            Kind::Change,
            200,
        ),
        (
            "GET",
            "/api/me/notifications",
            "/api/me/notifications",
            None,
            Kind::Read,
            200,
        ),
        (
            "PUT",
            "/api/me/notifications",
            "/api/me/notifications",
            Some(json!({ "after_seconds": 60 })),
            Kind::Change,
            200,
        ),
        (
            "GET",
            "/api/approvals",
            "/api/approvals",
            None,
            Kind::Read,
            200,
        ),
        (
            "POST",
            "/api/approvals",
            "/api/approvals",
            Some(json!({ "request_id": "abcde", "tool_name": "Bash" })),
            Kind::Change,
            201,
        ),
        ("GET", "/api/open", "/api/open", None, Kind::Read, 200),
        (
            "GET",
            "/api/messages/{id}/attachments/{n}",
            "/api/messages/999999/attachments/1",
            None,
            Kind::Read,
            404,
        ),
        ("GET", "/api/claims", "/api/claims", None, Kind::Read, 200),
        // Claimed again by the same person: renewed, 201 each time.
        (
            "POST",
            "/api/claims",
            "/api/claims",
            Some(json!({ "what": "key:matrix" })),
            Kind::Change,
            201,
        ),
        (
            "DELETE",
            "/api/claims/{id}",
            "/api/claims/999999",
            None,
            Kind::Change,
            404,
        ),
        (
            "POST",
            "/api/messages/{id}/ack",
            "/api/messages/999999/ack",
            Some(json!({ "result": "done" })),
            Kind::Change,
            404,
        ),
        // One that does not exist: past the credentials, the handler's 404.
        (
            "GET",
            "/api/approvals/{id}",
            "/api/approvals/999",
            None,
            Kind::Read,
            404,
        ),
        (
            "POST",
            "/api/approvals/{id}",
            "/api/approvals/999",
            Some(json!({ "behavior": "allow" })),
            Kind::Change,
            404,
        ),
        (
            "GET",
            "/api/push/key",
            "/api/push/key",
            None,
            Kind::Read,
            200,
        ),
        (
            "GET",
            "/api/push/subscriptions",
            "/api/push/subscriptions",
            None,
            Kind::Read,
            200,
        ),
        (
            "POST",
            "/api/push/subscriptions",
            "/api/push/subscriptions",
            Some(json!({ "endpoint": "https://push.example.com/send/abc",
                         "keys": { "p256dh": format!("BA{}", "A".repeat(85)),
                                   "auth": "AAAAAAAAAAAAAAAAAAAAAA" } })),
            Kind::Change,
            201,
        ),
        (
            "DELETE",
            "/api/push/subscriptions/{id}",
            "/api/push/subscriptions/999",
            None,
            Kind::Change,
            404,
        ),
        (
            "GET",
            "/api/me/stream",
            "/api/me/stream",
            None,
            Kind::Stream,
            200,
        ),
        ("GET", "/approvals", "/approvals", None, Kind::Read, 200),
        (
            "POST",
            "/approvals/{id}",
            "/approvals/1",
            None,
            Kind::Read,
            415,
        ),
        ("GET", "/settings", "/settings", None, Kind::Read, 200),
        ("POST", "/settings", "/settings", None, Kind::Read, 415),
        (
            "POST",
            "/settings/devices",
            "/settings/devices",
            None,
            Kind::Read,
            415,
        ),
        (
            "POST",
            "/settings/devices/{id}/remove",
            "/settings/devices/1/remove",
            None,
            Kind::Read,
            415,
        ),
        (
            "GET",
            "/manifest.webmanifest",
            "/manifest.webmanifest",
            None,
            Kind::Asset,
            200,
        ),
        ("GET", "/sw.js", "/sw.js", None, Kind::Asset, 200),
        ("GET", "/", "/", None, Kind::Read, 200),
        ("GET", "/threads/{id}", "/threads/1", None, Kind::Read, 200),
        (
            "GET",
            "/channels/{channel}",
            "/channels/ops",
            None,
            Kind::Read,
            200,
        ),
        (
            "GET",
            "/threads/{id}/messages",
            "/threads/1/messages?after=0",
            None,
            Kind::Read,
            200,
        ),
        (
            "GET",
            "/channels/{channel}/messages",
            "/channels/ops/messages?after=0",
            None,
            Kind::Read,
            200,
        ),
        ("GET", "/search", "/search?q=thread", None, Kind::Read, 200),
        // A page's forms take a read's credentials, then read the form:
        // with no form body, 415 (their own refusals are in `page.rs`).
        ("POST", "/threads/{id}", "/threads/1", None, Kind::Read, 415),
        (
            "POST",
            "/channels/{channel}",
            "/channels/ops",
            None,
            Kind::Read,
            415,
        ),
        ("POST", "/new", "/new", None, Kind::Read, 415),
        ("POST", "/status", "/status", None, Kind::Read, 415),
        // Signing out answers 401, so the browser forgets the credential;
        // signing in (not signed out) goes on to the overview.
        ("GET", "/signout", "/signout", None, Kind::Read, 401),
        ("GET", "/signin", "/signin", None, Kind::Read, 200),
        ("GET", "/static/{file}", &css, None, Kind::Asset, 200),
        (
            "GET",
            "/favicon.ico",
            "/favicon.ico",
            None,
            Kind::Asset,
            200,
        ),
        (
            "POST",
            "/settings/grants/{id}/revoke",
            "/settings/grants/1/revoke",
            None,
            Kind::Read,
            415,
        ),
        // The consent page: no request to show (400), no form token (403).
        (
            "GET",
            "/oauth/authorize",
            "/oauth/authorize",
            None,
            Kind::Read,
            400,
        ),
        (
            "POST",
            "/oauth/authorize",
            "/oauth/authorize",
            None,
            Kind::Read,
            403,
        ),
        (
            "GET",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource",
            None,
            Kind::Anonymous,
            200,
        ),
        (
            "GET",
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource/mcp",
            None,
            Kind::Anonymous,
            200,
        ),
        (
            "GET",
            "/.well-known/oauth-protected-resource/a2a",
            "/.well-known/oauth-protected-resource/a2a",
            None,
            Kind::Anonymous,
            200,
        ),
        (
            "GET",
            "/.well-known/oauth-authorization-server",
            "/.well-known/oauth-authorization-server",
            None,
            Kind::Anonymous,
            200,
        ),
        // Without a body: OAuth's invalid_request or invalid metadata.
        (
            "POST",
            "/oauth/register",
            "/oauth/register",
            None,
            Kind::Anonymous,
            400,
        ),
        (
            "POST",
            "/oauth/token",
            "/oauth/token",
            None,
            Kind::Anonymous,
            400,
        ),
        (
            "POST",
            "/oauth/revoke",
            "/oauth/revoke",
            None,
            Kind::Anonymous,
            400,
        ),
        ("GET", "/metrics", "/metrics", None, Kind::Absent, 404),
        (
            "GET",
            "/api/openapi.json",
            "/api/openapi.json",
            None,
            Kind::Anonymous,
            200,
        ),
        (
            "GET",
            "/a2a/{handle}/.well-known/agent-card.json",
            "/a2a/alice/.well-known/agent-card.json",
            None,
            Kind::Anonymous,
            200,
        ),
        // A JSON-RPC call answers 200, its error (no task 999999) inside.
        (
            "POST",
            "/a2a/{handle}",
            "/a2a/alice",
            Some(json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask",
                         "params": { "id": "999999" } })),
            Kind::Change,
            200,
        ),
        ("GET", "/healthz", "/healthz", None, Kind::Open, 200),
        ("GET", "/readyz", "/readyz", None, Kind::Open, 200),
    ];
    let named: BTreeSet<(String, String)> = routes
        .iter()
        .map(|(method, route, ..)| (method.to_string(), route.to_string()))
        .collect();
    assert_eq!(
        named,
        routes_in_the_router(),
        "every route the router has is in this matrix, and nothing else"
    );

    let mut mismatches = Vec::new();
    for (method, _, path, body, kind, success) in &routes {
        for presents in ALL {
            let mut url = format!("{}{path}", app.url());
            if presents == QueryToken {
                url.push(if path.contains('?') { '&' } else { '?' });
                url.push_str(&format!("token={alice}"));
            }
            let mut request = http()
                .request(method.parse().unwrap(), &url)
                .header("accept", "application/json, text/event-stream");
            request = match presents {
                Nothing | QueryToken => request,
                UnknownToken => request.bearer_auth("xtalk_unknown"),
                RevokedToken => request.bearer_auth(&revoked),
                Bearer => request.bearer_auth(&alice),
                Basic => request.header(
                    "authorization",
                    format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(format!("anyone:{alice}"))
                    ),
                ),
                ForeignOrigin => request
                    .bearer_auth(&alice)
                    .header("origin", "https://evil.example"),
                AllowedOrigin => request
                    .bearer_auth(&alice)
                    .header("origin", "https://app.example.com"),
            };
            if let Some(body) = body {
                request = request.json(body);
            }
            let status = request.send().await.unwrap().status().as_u16();
            let want = expected(*kind, presents, *success);
            if status != want {
                mismatches.push(format!(
                    "{method} {path} with {presents:?}: got {status}, want {want}"
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "\n{}", mismatches.join("\n"));
}

#[tokio::test]
async fn the_relays_own_origin_is_allowed_and_other_hosts_are_refused() {
    let app = spawn_app_with(|config| {
        config.public_url = "https://relay.example.com".into();
        config.allowed_hosts = Some(vec![
            "localhost".into(),
            "127.0.0.1".into(),
            "relay.example.com".into(),
        ]);
    })
    .await;
    let alice = app.add_person("alice").await;
    let people = format!("{}/api/people", app.url());
    let port = app.running.addr.port();

    // Alice's request for her people list, with one header set.
    let people_with = |name: &'static str, value: String| {
        http()
            .get(&people)
            .bearer_auth(&alice)
            .header(name, value)
            .send()
    };

    // A page on the relay's own origin (scheme, host and port of the request).
    let own = people_with("origin", format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    assert_eq!(own.status(), 200);
    let other_port = people_with("origin", "http://127.0.0.1:1".into())
        .await
        .unwrap();
    assert_eq!(other_port.status(), 403);

    // DNS rebinding: a name that is not the relay's.
    let rebound = people_with("host", format!("evil.example:{port}"))
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    assert_eq!(
        rebound.json::<Value>().await.unwrap(),
        json!({ "error": { "code": "forbidden", "message": "this relay does not answer for \"evil.example\"; use https://relay.example.com" } })
    );
    let named = people_with("host", "relay.example.com".into())
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    // Health checks answer whatever the name.
    let health = http()
        .get(format!("{}/healthz", app.url()))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn responses_carry_the_security_headers() {
    let app = spawn_app_with(|_| {}).await;
    let response = http()
        .get(format!("{}/healthz", app.url()))
        .send()
        .await
        .unwrap();
    let headers = response.headers();
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "same-origin");
    assert_eq!(
        headers["content-security-policy"],
        crosstalk::layers::edge::CONTENT_SECURITY_POLICY
    );
    assert!(
        headers.get("strict-transport-security").is_none(),
        "HSTS only under TLS"
    );
}

#[tokio::test]
async fn the_team_page_asks_for_basic_credentials_and_escapes_every_message() {
    let app = spawn_app_with(|_| {}).await;
    let alice = app.add_person("alice").await;
    let hostile = "<script>alert('x')</script><img src=x onerror=alert(1)> & \"quotes\"";
    crate::support::post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": hostile, "type": "<b>T</b>" }),
    )
    .await;
    crate::support::post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "alice", "body": hostile }),
    )
    .await;

    let anonymous = http().get(format!("{}/", app.url())).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.headers()["www-authenticate"],
        "Basic realm=\"crosstalk at 127.0.0.1\", charset=\"UTF-8\""
    );
    assert!(
        anonymous.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let sign_in = anonymous.text().await.unwrap();
    assert!(sign_in.contains("crosstalk add HANDLE"), "{sign_in}");

    for path in ["/", "/channels/ops", "/threads/1"] {
        let page = http()
            .get(format!("{}{path}", app.url()))
            .basic_auth("alice", Some(&alice))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200, "{path}");
        assert_eq!(
            page.headers()["content-security-policy"],
            crosstalk::layers::edge::CONTENT_SECURITY_POLICY
        );
        let html = page.text().await.unwrap();
        assert!(
            !html.contains("<script>alert"),
            "{path} carries the script unescaped"
        );
        assert!(
            !html.contains("<img src=x"),
            "{path} carries markup unescaped"
        );
        assert!(
            !html.contains("<b>T</b>"),
            "{path} carries the type unescaped"
        );
        // Shown as text: escaped by the templates, or by the Markdown
        // renderer in a body.
        assert!(
            html.contains("&#60;script&#62;alert(&#39;x&#39;)&#60;/script&#62;")
                || html.contains("&lt;script&gt;alert('x')&lt;/script&gt;"),
            "{path}: {html}"
        );
        assert_eq!(
            html.matches("<script").count(),
            html.matches("<script src=\"/static/live.").count(),
            "{path}: the only script is the page's own file"
        );
    }
}
