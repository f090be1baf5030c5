//! The relay as an OAuth authorization server, played by a client written
//! here over plain HTTP (reqwest), as a connector speaks it: discovery from
//! the 401, registration (DCR, and a metadata document this test serves),
//! the consent page answered as a browser would, the code exchange with
//! PKCE, MCP calls as the person, refresh, and every way it must refuse.
//! The official SDKs' OAuth clients run in `oauth_clients.rs`.

use crate::support::*;
use base64::Engine;
use crosstalk::config::Config;
use crosstalk::model::TokenHash;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const REDIRECT: &str = "http://127.0.0.1:4567/callback";

/// The person answers the consent page as fast as the test runs: the
/// page's delay before Allow is taken is off (its own test,
/// `an_allow_pressed_as_the_consent_page_opens_allows_nothing`, and the
/// browser's in `oauth_clients.rs` keep it). For every test that presses
/// Allow through [`Connector::answer`].
pub fn at_once(config: &mut Config) {
    config.consent_delay = std::time::Duration::ZERO;
}

/// A PKCE verifier and its S256 challenge.
fn pkce() -> (String, String) {
    let verifier = format!("v{}", crosstalk::model::Token::generate().expose());
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// Undoes the templates' escaping of an attribute value.
fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let entity = &rest[at..];
        let end = entity.find(';').expect("an entity ends with ;");
        out.push(match &entity[1..end] {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            number => {
                let code = match number.strip_prefix("#x") {
                    Some(hex) => u32::from_str_radix(hex, 16).unwrap(),
                    None => number.trim_start_matches('#').parse().unwrap(),
                };
                char::from_u32(code).unwrap()
            }
        });
        rest = &entity[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The hidden fields of the consent page's form.
fn hidden_fields(html: &str) -> Vec<(String, String)> {
    html.split("<input type=\"hidden\" ")
        .skip(1)
        .filter_map(|rest| {
            let name = rest.strip_prefix("name=\"")?.split('"').next()?;
            let value = rest.split("value=\"").nth(1)?.split('"').next()?;
            Some((unescape(name), unescape(value)))
        })
        .collect()
}

/// The query parameters of a redirect's `Location`.
fn query_of(location: &str) -> HashMap<String, String> {
    let url = url::Url::parse(location).expect("an absolute Location");
    url.query_pairs().into_owned().collect()
}

pub struct Connector {
    pub url: String,
    pub client_id: String,
    pub redirect: String,
    /// The resource it signs in for (RFC 8707); none: the relay's `/mcp`.
    pub resource: Option<String>,
}

impl Connector {
    /// Registers by DCR with `redirect`, as a public client.
    pub async fn register(app: &TestApp, redirect: &str) -> Connector {
        Connector::register_asking(app, "Test <Connector>", redirect, "none").await
    }

    /// Registers by DCR as `name` with `redirect`, asking for `auth_method`
    /// at the token endpoint: registered public (`none`) whatever it asks.
    pub async fn register_asking(
        app: &TestApp,
        name: &str,
        redirect: &str,
        auth_method: &str,
    ) -> Connector {
        let response = http()
            .post(format!("{}/oauth/register", app.url()))
            .json(&json!({
                "client_name": name,
                "redirect_uris": [redirect],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": auth_method,
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let registered: Value = response.json().await.unwrap();
        assert_eq!(registered["token_endpoint_auth_method"], "none");
        assert!(registered.get("client_secret").is_none(), "{registered}");
        assert_eq!(registered["redirect_uris"], json!([redirect]));
        Connector {
            url: app.url(),
            client_id: registered["client_id"].as_str().unwrap().to_owned(),
            redirect: redirect.to_owned(),
            resource: None,
        }
    }

    /// The resource it signs in for.
    pub fn resource(&self) -> String {
        self.resource
            .clone()
            .unwrap_or_else(|| format!("{}/mcp", self.url))
    }

    pub fn authorize_url(&self, challenge: &str, extra: &[(&str, &str)]) -> String {
        let mut url = url::Url::parse(&format!("{}/oauth/authorize", self.url)).unwrap();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.client_id)
                .append_pair("redirect_uri", &self.redirect)
                .append_pair("code_challenge", challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", "st-42")
                .append_pair("resource", &self.resource())
                .append_pair("scope", "crosstalk");
            for (name, value) in extra {
                query.append_pair(name, value);
            }
        }
        url.to_string()
    }

    /// The consent page a person signed in with `token` is shown.
    pub async fn consent_page(&self, authorize_url: &str, token: &str) -> reqwest::Response {
        browser()
            .get(authorize_url)
            .basic_auth("x", Some(token))
            .header("sec-fetch-site", "cross-site")
            .header("sec-fetch-mode", "navigate")
            .header("sec-fetch-dest", "document")
            .send()
            .await
            .unwrap()
    }

    /// The person presses `decision` on the page: the answer's response.
    pub async fn answer(&self, html: &str, token: &str, decision: &str) -> reqwest::Response {
        let mut fields = hidden_fields(html);
        fields.push(("decision".into(), decision.into()));
        browser()
            .post(format!("{}/oauth/authorize", self.url))
            .basic_auth("x", Some(token))
            .header("sec-fetch-site", "same-origin")
            .header("origin", &self.url)
            .form(&fields)
            .send()
            .await
            .unwrap()
    }

    /// Signs in as the person with `token` and allows: the code.
    pub async fn code(&self, token: &str, challenge: &str) -> String {
        let page = self
            .consent_page(&self.authorize_url(challenge, &[]), token)
            .await;
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        let answered = self.answer(&html, token, "allow").await;
        assert_eq!(answered.status(), 303);
        let location = answered.headers()["location"].to_str().unwrap().to_owned();
        assert!(location.starts_with(&self.redirect), "{location}");
        let query = query_of(&location);
        assert_eq!(query["state"], "st-42");
        assert_eq!(query["iss"], self.url);
        query["code"].clone()
    }

    pub async fn token(&self, fields: &[(&str, &str)]) -> (u16, Value) {
        let response = http()
            .post(format!("{}/oauth/token", self.url))
            .form(fields)
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["cache-control"], "no-store");
        (
            response.status().as_u16(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    pub async fn exchange(&self, code: &str, verifier: &str) -> (u16, Value) {
        let resource = self.resource();
        self.token(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", &self.client_id),
            ("redirect_uri", &self.redirect),
            ("code_verifier", verifier),
            ("resource", &resource),
        ])
        .await
    }

    pub async fn refresh(&self, refresh_token: &str) -> (u16, Value) {
        let resource = self.resource();
        self.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", &self.client_id),
            ("resource", &resource),
        ])
        .await
    }

    /// The whole sign-in: access and refresh tokens.
    pub async fn sign_in(&self, token: &str) -> Value {
        let (verifier, challenge) = pkce();
        let code = self.code(token, &challenge).await;
        let (status, tokens) = self.exchange(&code, &verifier).await;
        assert_eq!(status, 200, "{tokens}");
        tokens
    }
}

/// The person with `token` presses Remove on the first app their
/// `settings` page lists, as a browser posts it: the answer's status.
async fn remove_first_app(app: &TestApp, token: &str, settings: &str) -> u16 {
    let action = settings
        .split("action=\"/settings/grants/")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let csrf = hidden_fields(settings)
        .into_iter()
        .find(|(n, _)| n == "csrf")
        .unwrap()
        .1;
    browser()
        .post(format!("{}/settings/grants/{action}", app.url()))
        .basic_auth("x", Some(token))
        .header("sec-fetch-site", "same-origin")
        .form(&[("csrf", csrf)])
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Moves every grant's grace for a retried refresh into the past, as if
/// its last refresh were long ago.
fn end_the_grace(app: &TestApp) {
    app.sql("UPDATE oauth_grants SET previous_until = 1", |conn, q| {
        conn.execute(q, []).unwrap()
    });
}

/// The status of an MCP initialize with `token`.
async fn mcp_status(app: &TestApp, token: &str) -> u16 {
    mcp_post(&app.url(), token, initialize())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Who an MCP session opened with `access` acts as: `list_peers` answers
/// (naming the team), and a message it sends is stored as theirs.
async fn peers_as(app: &TestApp, access: &str) -> Vec<String> {
    let agent = app.mcp(access).await;
    let peers = agent.call("list_peers", json!({})).await.ok();
    assert!(
        peers["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["handle"] == "alice"),
        "{peers}"
    );
    let sent = agent
        .call(
            "send_message",
            json!({ "to": "alice", "body": "from a connector" }),
        )
        .await
        .ok();
    let id = sent["message_id"].as_i64().unwrap();
    vec![
        app.sql("SELECT sender FROM messages WHERE id = ?1", |conn, q| {
            conn.query_row(q, [id], |row| row.get::<_, String>(0))
                .unwrap()
        }),
    ]
}

#[tokio::test]
async fn discovery_starts_from_the_401_and_a_static_token_never_meets_it() {
    let app = spawn_app().await;
    let bob = app.add_person("bob").await;
    let url = app.url();

    let refused = mcp_post(&url, "", initialize())
        .header("authorization", "")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
    assert_eq!(
        challenge,
        format!(
            "Bearer realm=\"crosstalk\", \
             resource_metadata=\"{url}/.well-known/oauth-protected-resource/mcp\", \
             scope=\"crosstalk\""
        )
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let (status, resource) = get(&app, path, "").await;
        assert_eq!(status, 200);
        assert_eq!(resource["resource"], format!("{url}/mcp"));
        assert_eq!(resource["authorization_servers"], json!([url]));
        assert_eq!(resource["bearer_methods_supported"], json!(["header"]));
    }
    let (status, server) = get(&app, "/.well-known/oauth-authorization-server", "").await;
    assert_eq!(status, 200);
    assert_eq!(server["issuer"], url);
    assert_eq!(server["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(
        server["token_endpoint_auth_methods_supported"],
        json!(["none"])
    );
    assert_eq!(server["client_id_metadata_document_supported"], true);
    assert_eq!(
        server["authorization_response_iss_parameter_supported"],
        true
    );
    assert_eq!(
        server["authorization_endpoint"],
        format!("{url}/oauth/authorize")
    );

    // A static token is served as ever: no challenge, no discovery.
    let served = mcp_post(&url, &bob, initialize()).send().await.unwrap();
    assert_eq!(served.status(), 200);
    assert!(served.headers().get("www-authenticate").is_none());
    // A person's static token refused (here rotated) is told so, and is
    // not pointed into OAuth; a token of the OAuth server's shape that
    // the relay does not know (expired, revoked) is pointed back to it.
    let old = bob.clone();
    app.running.state.relay.team().rotate("bob").await.unwrap();
    let refused = mcp_post(&url, &old, initialize()).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()["www-authenticate"],
        "Bearer realm=\"crosstalk\", error=\"invalid_token\", error_description=\"the token \
         is unknown or was revoked or rotated: ask for a new one (crosstalk rotate)\""
    );
    let unknown = format!("xtalk_oauth_{}", "a".repeat(52));
    let refused = mcp_post(&url, &unknown, initialize()).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()["www-authenticate"],
        format!(
            "Bearer realm=\"crosstalk\", \
             resource_metadata=\"{url}/.well-known/oauth-protected-resource/mcp\", \
             scope=\"crosstalk\", error=\"invalid_token\", error_description=\"the token is \
             unknown, expired or revoked\""
        )
    );
    // The REST API's 401 is no OAuth resource's.
    let api = http().get(format!("{url}/api/inbox")).send().await.unwrap();
    assert_eq!(api.status(), 401);
    assert!(
        api.headers()
            .get("www-authenticate")
            .is_none_or(|v| !v.to_str().unwrap().contains("resource_metadata"))
    );
}

#[tokio::test]
async fn a_connector_signs_in_as_its_person_refreshes_and_is_revoked_on_the_page() {
    let app = spawn_app_with(at_once).await;
    let bob = app.add_named("bob", "Bob Builder").await;
    app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;

    // The page names the client (escaped), the person, where they go next.
    let (_, challenge) = pkce();
    let shown = connector
        .consent_page(&connector.authorize_url(&challenge, &[]), &bob)
        .await;
    assert_eq!(shown.status(), 200);
    let policy = shown.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains("form-action 'self' http://127.0.0.1:4567;"),
        "{policy}"
    );
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let html = shown.text().await.unwrap();
    assert!(html.contains("Test &#60;Connector&#62;"), "{html}");
    assert!(!html.contains("Test <Connector>"));
    assert!(html.contains("Bob Builder (@bob)"));
    assert!(html.contains(
        "<code class=\"redirect-uri\">http://<strong class=\"redirect-host\">127.0.0.1</strong>\
         :4567/callback</code>"
    ));

    let tokens = connector.sign_in(&bob).await;
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    assert_eq!(tokens["scope"], "crosstalk");
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(peers_as(&app, &access).await, ["bob"]);

    // Kept only as hashes.
    let hash = |token: &str| TokenHash::of(token).as_bytes().to_vec();
    let kept = app.sql(
        "SELECT count(*) FROM oauth_grants WHERE access_hash = ?1 AND refresh_hash = ?2",
        |conn, q| {
            conn.query_row(q, [hash(&access), hash(&refresh)], |r| r.get::<_, i64>(0))
                .unwrap()
        },
    );
    assert_eq!(kept, 1);
    let file = std::fs::read(&app.db).unwrap();
    let wal = std::fs::read(app.db.with_extension("db-wal")).unwrap_or_default();
    for token in [&access, &refresh] {
        for bytes in [&file, &wal] {
            assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()));
        }
    }

    // A refresh rotates: new tokens, and the new access token works.
    let (status, rotated) = connector.refresh(&refresh).await;
    assert_eq!(status, 200, "{rotated}");
    let access2 = rotated["access_token"].as_str().unwrap().to_owned();
    assert_ne!(access2, access);
    assert_ne!(rotated["refresh_token"], refresh.as_str());
    assert_eq!(peers_as(&app, &access2).await, ["bob"]);

    // The page lists the grant; removing it ends the tokens at once.
    let (status, settings) = page(&app, "/settings", &bob).await;
    assert_eq!(status, 200);
    assert!(
        settings.contains("<strong>Test &#60;Connector&#62;</strong>"),
        "{settings}"
    );
    let (_, alice_settings) = page(&app, "/settings", &app.add_person("carol").await).await;
    assert!(alice_settings.contains("No app is connected."));
    let agent = app.mcp(&access2).await;
    assert_eq!(remove_first_app(&app, &bob, &settings).await, 303);
    assert_eq!(mcp_status(&app, &access2).await, 401);
    match agent.call("list_peers", json!({})).await {
        Outcome::Ok(value) => panic!("a revoked grant's session still answers: {value}"),
        Outcome::ToolError(_) | Outcome::Protocol(_) => {}
    }
    let (status, refused) = connector
        .refresh(rotated["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (400, Some("invalid_grant"))
    );
}

#[tokio::test]
async fn codes_refresh_tokens_and_access_tokens_are_bound_and_used_once() {
    let app = spawn_app_with(at_once).await;
    let bob = app.add_person("bob").await;
    let connector = Connector::register(&app, REDIRECT).await;

    // A wrong verifier, a changed redirect, another client, another
    // resource: each refused, and the code is spent.
    for (field, value, error) in [
        ("code_verifier", "w".repeat(50), "invalid_grant"),
        (
            "redirect_uri",
            "http://127.0.0.1:4567/elsewhere".to_owned(),
            "invalid_grant",
        ),
        (
            "resource",
            "https://other.example/mcp".to_owned(),
            "invalid_target",
        ),
    ] {
        let (verifier, challenge) = pkce();
        let code = connector.code(&bob, &challenge).await;
        let resource = format!("{}/mcp", app.url());
        let mut fields = vec![
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &connector.client_id),
            ("redirect_uri", &connector.redirect),
            ("code_verifier", &verifier),
            ("resource", &resource),
        ];
        fields.retain(|(name, _)| *name != field);
        fields.push((field, &value));
        let (status, refused) = connector.token(&fields).await;
        assert_eq!(
            (status, refused["error"].as_str()),
            (400, Some(error)),
            "{field}"
        );
        let (status, _) = connector.exchange(&code, &verifier).await;
        assert_eq!(status, 400, "a refused code stays spent ({field})");
    }

    // A code used twice: refused, and what the first use gave ends.
    let (verifier, challenge) = pkce();
    let code = connector.code(&bob, &challenge).await;
    let (status, first) = connector.exchange(&code, &verifier).await;
    assert_eq!(status, 200);
    let access = first["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_status(&app, &access).await, 200);
    let (status, again) = connector.exchange(&code, &verifier).await;
    assert_eq!(
        (status, again["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    assert_eq!(mcp_status(&app, &access).await, 401);

    // A refresh token used twice, past the grace for a retry: the grant
    // ends.
    let tokens = connector.sign_in(&bob).await;
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let (status, rotated) = connector.refresh(refresh).await;
    assert_eq!(status, 200);
    let access = rotated["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_status(&app, &access).await, 200);
    end_the_grace(&app);
    let (status, reused) = connector.refresh(refresh).await;
    assert_eq!(
        (status, reused["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    assert_eq!(mcp_status(&app, &access).await, 401);
    let (status, _) = connector
        .refresh(rotated["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 400);

    // An access token only on /mcp, only in the header, only until it
    // expires.
    let tokens = connector.sign_in(&bob).await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let (status, body) = app.rest(&access).get("/api/inbox").await;
    assert_eq!(status, 401, "{body}");
    let query = http()
        .get(format!("{}/api/inbox/stream?token={access}", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(query.status(), 401);
    // On /mcp too, the one place it is taken, but only in the header.
    for name in ["access_token", "token"] {
        let query = http()
            .post(format!("{}/mcp?{name}={access}", app.url()))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize())
            .send()
            .await
            .unwrap();
        assert_eq!(query.status(), 401, "{name}");
    }
    let (status, _) = page(&app, "/", &access).await;
    assert_eq!(status, 401);
    assert_eq!(mcp_status(&app, &access).await, 200);
    app.sql(
        "UPDATE oauth_grants SET access_expires = 1 WHERE access_hash = ?1",
        |conn, q| {
            conn.execute(q, [TokenHash::of(&access).as_bytes().to_vec()])
                .unwrap()
        },
    );
    // Another person added moves the credentials revision: the relay reads
    // the tokens again.
    app.add_person("dora").await;
    assert_eq!(mcp_status(&app, &access).await, 401);
    // A refresh token at the token endpoint for a client deleted since:
    // 401 invalid_client, so it registers again.
    let (status, gone) = connector
        .token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ("client_id", "crosstalk-client-nobody"),
        ])
        .await;
    assert_eq!(
        (status, gone["error"].as_str()),
        (401, Some("invalid_client"))
    );

    // Revocation (RFC 7009) ends the grant.
    let tokens = connector.sign_in(&bob).await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let revoked = http()
        .post(format!("{}/oauth/revoke", app.url()))
        .form(&[("token", tokens["refresh_token"].as_str().unwrap())])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    assert_eq!(mcp_status(&app, &access).await, 401);

    // Rotating the person's token (`crosstalk rotate`, another process on
    // the same database) ends every grant of theirs; so does revoking them.
    let tokens = connector.sign_in(&bob).await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_status(&app, &access).await, 200);
    let db = app.db.clone();
    let printed = tokio::task::spawn_blocking(move || stdout(&crosstalk(&db, &["rotate", "bob"])))
        .await
        .unwrap();
    let bob = token_in(&printed);
    assert_eq!(mcp_status(&app, &access).await, 401);
    let tokens = connector.sign_in(&bob).await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_status(&app, &access).await, 200);
    app.revoke("bob").await;
    assert_eq!(mcp_status(&app, &access).await, 401);
}

#[tokio::test]
async fn a_grant_removed_on_the_page_ends_the_waits_and_streams_it_holds_open() {
    let app = spawn_app_with(at_once).await;
    let bob = app.add_named("bob", "Bob Builder").await;
    app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let tokens = connector.sign_in(&bob).await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();

    let (mut listening, wait) = crate::hardening::a_session_waiting(&app.url(), &access, 7).await;
    crate::hardening::parked(&app, 1).await;

    // Bob removes the app on his settings page.
    let (_, settings) = page(&app, "/settings", &bob).await;
    assert_eq!(remove_first_app(&app, &bob, &settings).await, 303);

    let answered = crate::hardening::within("the MCP wait", wait)
        .await
        .unwrap();
    let answer = answered
        .iter()
        .find(|m| m["id"] == 7)
        .expect("the call is answered");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let seen = crate::hardening::within("the session's stream", listening.until_closed()).await;
    assert!(!seen.iter().any(|e| e == "message"), "{seen:?}");
    assert_eq!(mcp_status(&app, &access).await, 401);
}

#[tokio::test]
async fn a_token_is_taken_only_by_the_relay_it_was_issued_for() {
    let app = spawn_app_with(at_once).await;
    let bob = app.add_person("bob").await;
    app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let tokens = connector.sign_in(&bob).await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_status(&app, &access).await, 200);

    // The operator moves the relay to another address on the same
    // database: the grant's resource is no longer this relay's.
    let app = app
        .restart_with(|config| {
            let port = config.listen.port();
            config.public_url = format!("http://localhost:{port}");
            config.settings.oauth.resource = format!("http://localhost:{port}/mcp");
        })
        .await;
    assert_eq!(mcp_status(&app, &access).await, 401);
    assert_eq!(
        mcp_status(&app, &bob).await,
        200,
        "a static token has no audience"
    );
    let (status, refused) = connector
        .refresh(tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (400, Some("invalid_target")),
        "{refused}"
    );
}

#[tokio::test]
async fn a_connector_asking_to_be_confidential_is_registered_public_and_signs_in() {
    // claude.ai's connectors register asking for client_secret_post, with
    // their callback on claude.ai; the relay registers them public, says
    // so, and the code flow with PKCE alone goes through.
    let app = spawn_app_with(at_once).await;
    let bob = app.add_person("bob").await;
    app.add_person("alice").await;
    let connector = Connector::register_asking(
        &app,
        "Claude",
        "https://claude.ai/api/mcp/auth_callback",
        "client_secret_post",
    )
    .await;
    let tokens = connector.sign_in(&bob).await;
    assert_eq!(
        peers_as(&app, tokens["access_token"].as_str().unwrap()).await,
        ["bob"]
    );
}

/// The refusal of a registration whose redirect URIs the operator's policy
/// does not admit.
fn not_admitted() -> Value {
    json!({
        "error": "invalid_redirect_uri",
        "error_description": "this relay does not let clients with these redirect URIs \
                              register: its operator lists the ones it allows in \
                              RELAY_OAUTH_CLIENTS",
    })
}

/// Registers by DCR with `redirect_uris` and `client_name`: the answer's
/// status and body.
async fn register_raw(app: &TestApp, name: &str, redirect_uris: &[&str]) -> (u16, Value) {
    let response = http()
        .post(format!("{}/oauth/register", app.url()))
        .json(&json!({ "client_name": name, "redirect_uris": redirect_uris }))
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_default_policy_admits_the_connectors_callbacks_not_other_paths_there() {
    let app = spawn_app().await;
    for callback in [
        "https://claude.ai/api/mcp/auth_callback",
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "https://chatgpt.com/connector/oauth/eaQ3VyiNzLuI",
    ] {
        Connector::register(&app, callback).await;
    }
    for elsewhere in [
        "https://claude.ai/api/organizations/mine",
        "https://claude.ai:8443/api/mcp/auth_callback",
        "https://claude.com/api/mcp/auth_callback?next=https://evil.example",
        "https://chatgpt.com/connector/oauth/one/two",
        "https://chat.openai.com/aip/g-1/oauth/callback",
    ] {
        assert_eq!(
            register_raw(&app, "Elsewhere", &[elsewhere]).await,
            (400, not_admitted()),
            "{elsewhere}"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM oauth_clients"), 3);
}

#[tokio::test]
async fn the_consent_page_shows_the_whole_redirect_uri_not_only_its_host() {
    let app = spawn_app().await;
    let bob = app.add_person("bob").await;
    let (_, challenge) = pkce();
    for (redirect, shown) in [
        (
            "https://claude.ai/api/mcp/auth_callback",
            "<code class=\"redirect-uri\">https://<strong class=\"redirect-host\">claude.ai\
             </strong>/api/mcp/auth_callback</code>",
        ),
        (
            "http://127.0.0.1:4567/callback?app=crosstalk&step=2",
            "<code class=\"redirect-uri\">http://<strong class=\"redirect-host\">127.0.0.1</strong>\
             :4567/callback?app=crosstalk&#38;step=2</code>",
        ),
    ] {
        let connector = Connector::register(&app, redirect).await;
        let page = connector
            .consent_page(&connector.authorize_url(&challenge, &[]), &bob)
            .await;
        assert_eq!(page.status(), 200, "{redirect}");
        let html = page.text().await.unwrap();
        assert!(html.contains(shown), "{redirect}: {html}");
    }
}

/// The refusal of a client name holding `hidden`.
fn invisible(hidden: char) -> Value {
    json!({
        "error": "invalid_client_metadata",
        "error_description": format!(
            "client_name must not hold invisible or control characters (bidirectional \
             controls, zero-width characters, other format characters, line breaks): it holds \
             U+{:04X}, which could make the name on the consent page read as something it is \
             not",
            u32::from(hidden)
        ),
    })
}

#[tokio::test]
async fn a_client_name_with_invisible_characters_is_refused() {
    let app = spawn_app_with(|config| config.oauth_allow_private = true).await;
    let bob = app.add_person("bob").await;
    for hidden in [
        '\u{202E}', // a bidirectional override
        '\u{2067}', // a bidirectional isolate
        '\u{200F}', // a right-to-left mark
        '\u{200B}', // a zero-width space
        '\u{FEFF}', // the byte-order mark
        '\u{00AD}', // another format character: the soft hyphen
        '\u{0008}', // a control
    ] {
        assert_eq!(
            register_raw(&app, &format!("Claude{hidden} Desktop"), &[REDIRECT]).await,
            (400, invisible(hidden)),
            "U+{:04X}",
            u32::from(hidden)
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM oauth_clients"), 0);

    // A metadata document's name likewise: a page saying why, no form.
    let url = serve_document(|url| {
        json!({ "client_id": url, "client_name": "Claude\u{202E}", "redirect_uris": [REDIRECT] })
            .to_string()
    })
    .await;
    let connector = Connector {
        url: app.url(),
        client_id: url,
        redirect: REDIRECT.into(),
        resource: None,
    };
    let (_, challenge) = pkce();
    let page = connector
        .consent_page(&connector.authorize_url(&challenge, &[]), &bob)
        .await;
    assert_eq!(page.status(), 400);
    let text = page.text().await.unwrap();
    assert!(text.contains("it holds U+202E"), "{text}");
    assert!(!text.contains("consent-answer"), "{text}");
}

#[tokio::test]
async fn an_allow_pressed_as_the_consent_page_opens_allows_nothing() {
    // The delay the relay serves with.
    let app = spawn_app().await;
    assert_eq!(
        app.running.state.config.consent_delay,
        crosstalk::config::CONSENT_DELAY
    );
    let bob = app.add_person("bob").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let (verifier, challenge) = pkce();
    let page = connector
        .consent_page(&connector.authorize_url(&challenge, &[]), &bob)
        .await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();

    // Pressed as the page opens: the page again, saying why, and no code.
    let again = connector.answer(&html, &bob, "allow").await;
    assert_eq!(again.status(), 200);
    assert!(again.headers().get("location").is_none());
    let shown_again = again.text().await.unwrap();
    assert!(
        shown_again.contains(
            "Allow was pressed as this page opened, before it could be read, so nothing was \
             allowed."
        ),
        "{shown_again}"
    );
    assert!(shown_again.contains("<form class=\"consent-answer\""));
    assert_eq!(app.count("SELECT count(*) FROM oauth_codes"), 0);

    // Deny is never held.
    let denied = connector.answer(&html, &bob, "deny").await;
    assert_eq!(denied.status(), 303);
    let query = query_of(denied.headers()["location"].to_str().unwrap());
    assert_eq!(query["error"], "access_denied");

    // When the page was shown is the relay's word: a mark it did not make,
    // however old it claims to be, or none, is a page shown just now.
    let mark = hidden_fields(&html)
        .into_iter()
        .find(|(name, _)| name == "shown")
        .expect("the form carries when it was shown")
        .1;
    for unmarked in [
        html.replace(&mark, "0.AAAA"),
        html.replace(&mark, &format!("0.{}", mark.split_once('.').unwrap().1)),
        html.replace("name=\"shown\"", "name=\"unshown\""),
    ] {
        let again = connector.answer(&unmarked, &bob, "allow").await;
        assert_eq!(again.status(), 200);
        assert!(again.text().await.unwrap().contains("nothing was allowed"));
    }
    assert_eq!(app.count("SELECT count(*) FROM oauth_codes"), 0);

    // A moment later the same Allow is taken. (The delay is a time: press
    // again a little later.)
    let answered = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let answered = connector.answer(&html, &bob, "allow").await;
            if answered.status() == 303 {
                return answered;
            }
            assert_eq!(answered.status(), 200);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("an Allow a moment after the page opened is taken");
    let location = answered.headers()["location"].to_str().unwrap();
    assert!(location.starts_with(REDIRECT), "{location}");
    let code = query_of(location)["code"].clone();
    let (status, tokens) = connector.exchange(&code, &verifier).await;
    assert_eq!(status, 200, "{tokens}");
}

#[tokio::test]
async fn registrations_have_a_budget_of_their_own() {
    let app = spawn_app().await;
    // A refused attempt spends the address's budget too.
    let refused = http()
        .post(format!("{}/oauth/register", app.url()))
        .json(&json!({ "redirect_uris": ["https://evil.example/cb"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    for _ in 1..crosstalk::layers::limits::REGISTRATIONS_PER_ADDRESS {
        Connector::register(&app, REDIRECT).await;
    }
    let refused = http()
        .post(format!("{}/oauth/register", app.url()))
        .json(&json!({ "client_name": "one too many", "redirect_uris": [REDIRECT] }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert_eq!(
        app.count("SELECT count(*) FROM oauth_clients"),
        i64::from(crosstalk::layers::limits::REGISTRATIONS_PER_ADDRESS) - 1
    );
    // Nothing else from the address is held back by it.
    let (status, _) = get(&app, "/.well-known/oauth-authorization-server", "").await;
    assert_eq!(status, 200);
}

/// A relay behind a proxy on loopback, so a test can name each request's
/// client address (`X-Forwarded-For`), with registration budgets `adjust`
/// sets.
async fn behind_a_proxy(
    adjust: impl FnOnce(&mut crosstalk::relay::RegistrationBudgets),
) -> TestApp {
    spawn_app_with(|config| {
        at_once(config);
        config.trusted_proxies = vec![crosstalk::host::Cidr::parse("127.0.0.1/32").unwrap()];
        adjust(&mut config.settings.oauth.registrations);
    })
    .await
}

/// A registration from `client`, as the relay's proxy forwards it.
async fn register_from(app: &TestApp, client: &str) -> reqwest::Response {
    http()
        .post(format!("{}/oauth/register", app.url()))
        .header("x-forwarded-for", client)
        .json(&json!({ "client_name": "Test", "redirect_uris": [REDIRECT] }))
        .send()
        .await
        .unwrap()
}

/// A 429's `Retry-After` (within the hour) and its body.
async fn refused_for_the_hour(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 429);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&retry), "{retry}");
    response.json().await.unwrap()
}

#[tokio::test]
async fn a_flood_of_registrations_from_one_network_spends_its_budget_not_everyones() {
    // Twenty addresses could spend the relay's hourly budget for everyone:
    // neighbours (an IPv4 /24, an IPv6 /48) now share one of their own.
    let app = behind_a_proxy(|budgets| budgets.per_network = 3).await;
    for client in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
        assert_eq!(register_from(&app, client).await.status(), 201, "{client}");
    }
    let refused = refused_for_the_hour(register_from(&app, "203.0.113.200").await).await;
    assert_eq!(
        refused,
        json!({ "error": {
            "code": "rate_limited",
            "message": "this relay has registered 3 clients from this network (its IPv4 /24 or \
                        IPv6 /48) this hour, the most it does from one: try again later",
        }})
    );
    for client in ["2001:db8:7:1::1", "2001:db8:7:2::1", "2001:db8:7:3::1"] {
        assert_eq!(register_from(&app, client).await.status(), 201, "{client}");
    }
    refused_for_the_hour(register_from(&app, "2001:db8:7:ff::9").await).await;
    // Everyone else registers as before.
    for client in ["203.0.114.1", "198.51.100.7", "2001:db8:8::1"] {
        assert_eq!(register_from(&app, client).await.status(), 201, "{client}");
    }
    assert_eq!(app.count("SELECT count(*) FROM oauth_clients"), 9);
}

#[tokio::test]
async fn after_strangers_spend_the_relays_registrations_a_network_that_signed_in_still_registers() {
    let app = behind_a_proxy(|budgets| {
        budgets.strangers = 3;
        budgets.known = 2;
    })
    .await;
    let bob = app.add_person("bob").await;
    // A connector on 127.0.0.1 (the proxy itself) registers, a stranger
    // then, and completes a grant: its network is known.
    let connector = Connector::register(&app, REDIRECT).await;
    connector.sign_in(&bob).await;
    // Strangers spend what is left of the relay's budget.
    for client in ["198.51.100.1", "198.51.100.2"] {
        assert_eq!(register_from(&app, client).await.status(), 201, "{client}");
    }
    let refused = refused_for_the_hour(register_from(&app, "203.0.113.1").await).await;
    assert_eq!(
        refused,
        json!({ "error": {
            "code": "rate_limited",
            "message": "this relay has registered 3 clients this hour for networks no client \
                        has signed in from, the most it does: try again later",
        }})
    );
    // The known network registers from the budget kept for it, and from
    // nowhere else once that is spent too.
    Connector::register(&app, REDIRECT).await;
    Connector::register(&app, REDIRECT).await;
    let refused = http()
        .post(format!("{}/oauth/register", app.url()))
        .json(&json!({ "redirect_uris": [REDIRECT] }))
        .send()
        .await
        .unwrap();
    refused_for_the_hour(refused).await;
    assert_eq!(app.count("SELECT count(*) FROM oauth_clients"), 5);
}

#[tokio::test]
async fn the_authorization_step_refuses_what_does_not_check_out() {
    let app = spawn_app().await;
    let bob = app.add_person("bob").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let (_, challenge) = pkce();

    // Registration: an http redirect off loopback, or a host the operator
    // does not list.
    for (uri, error) in [
        ("http://evil.example/cb", "invalid_redirect_uri"),
        ("https://evil.example/cb", "invalid_redirect_uri"),
    ] {
        let response = http()
            .post(format!("{}/oauth/register", app.url()))
            .json(&json!({ "redirect_uris": [uri] }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{uri}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], error, "{uri}: {body}");
    }

    // An unknown client, or a redirect it did not register: a page, never
    // a redirect.
    for url in [
        connector
            .authorize_url(&challenge, &[])
            .replace(&connector.client_id, "crosstalk-client-unknown"),
        connector
            .authorize_url(&challenge, &[])
            .replace("%2Fcallback", "%2Fother"),
    ] {
        let response = connector.consent_page(&url, &bob).await;
        assert_eq!(response.status(), 400, "{url}");
        assert!(response.headers().get("location").is_none());
    }

    // PKCE plain, a resource for another server, another scope: back to
    // the client with the error.
    let plain = connector
        .authorize_url(&challenge, &[])
        .replace("code_challenge_method=S256", "code_challenge_method=plain");
    let other = connector.authorize_url(&challenge, &[]).replace(
        &url::form_urlencoded::byte_serialize(format!("{}/mcp", app.url()).as_bytes())
            .collect::<String>(),
        "https%3A%2F%2Fother.example%2Fmcp",
    );
    let scope = connector
        .authorize_url(&challenge, &[])
        .replace("scope=crosstalk", "scope=admin");
    for (url, error) in [
        (plain, "invalid_request"),
        (other, "invalid_target"),
        (scope, "invalid_scope"),
    ] {
        let response = connector.consent_page(&url, &bob).await;
        assert_eq!(response.status(), 303, "{url}");
        let location = response.headers()["location"].to_str().unwrap();
        assert!(location.starts_with(REDIRECT));
        let query = query_of(location);
        assert_eq!(query["error"], error, "{location}");
        assert_eq!(query["state"], "st-42");
    }

    // A parameter twice is refused.
    let twice = format!(
        "{}&scope=crosstalk",
        connector.authorize_url(&challenge, &[])
    );
    assert_eq!(connector.consent_page(&twice, &bob).await.status(), 400);

    // Signed out: the Basic challenge, even for a cross-site navigation.
    let unsigned = browser()
        .get(connector.authorize_url(&challenge, &[]))
        .header("sec-fetch-site", "cross-site")
        .header("sec-fetch-mode", "navigate")
        .header("sec-fetch-dest", "document")
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);
    assert!(
        unsigned.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    // A cross-site request that is no top-level navigation is refused.
    let fetched = browser()
        .get(connector.authorize_url(&challenge, &[]))
        .basic_auth("x", Some(&bob))
        .header("sec-fetch-site", "cross-site")
        .header("sec-fetch-mode", "cors")
        .send()
        .await
        .unwrap();
    assert_eq!(fetched.status(), 403);

    // The answer posted from another site, or with a forged form token.
    let page = connector
        .consent_page(&connector.authorize_url(&challenge, &[]), &bob)
        .await;
    let html = page.text().await.unwrap();
    let mut fields = hidden_fields(&html);
    fields.push(("decision".into(), "allow".into()));
    let cross = browser()
        .post(format!("{}/oauth/authorize", app.url()))
        .basic_auth("x", Some(&bob))
        .header("sec-fetch-site", "cross-site")
        .header("origin", "https://evil.example")
        .form(&fields)
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    let forged: Vec<(String, String)> = fields
        .iter()
        .map(|(n, v)| match n.as_str() {
            "csrf" => (n.clone(), "forged".to_owned()),
            _ => (n.clone(), v.clone()),
        })
        .collect();
    let forged = browser()
        .post(format!("{}/oauth/authorize", app.url()))
        .basic_auth("x", Some(&bob))
        .header("sec-fetch-site", "same-origin")
        .form(&forged)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!(app.count("SELECT count(*) FROM oauth_codes"), 0);

    // Deny goes back to the client with access_denied, and makes nothing.
    let denied = connector.answer(&html, &bob, "deny").await;
    assert_eq!(denied.status(), 303);
    let query = query_of(denied.headers()["location"].to_str().unwrap());
    assert_eq!(query["error"], "access_denied");
    assert_eq!(app.count("SELECT count(*) FROM oauth_codes"), 0);

    // The shared token is nobody: it cannot allow.
    let shared = spawn_app_with(|config| {
        config.settings.shared_token = Some(TokenHash::of("xtalk_shared_for_the_test"));
    })
    .await;
    let connector = Connector::register(&shared, REDIRECT).await;
    let response = connector
        .consent_page(
            &connector.authorize_url(&challenge, &[]),
            "xtalk_shared_for_the_test",
        )
        .await;
    assert_eq!(response.status(), 403);
}

/// A loopback server answering every GET with `body`: a client's metadata
/// document, as the test serves it.
async fn serve_document(body: impl Fn(&str) -> String + Send + Sync + 'static) -> String {
    serve_counted(body, "max-age=300").await.0
}

/// As [`serve_document`], with the `Cache-Control` it is served with, and
/// how many times it was fetched.
async fn serve_counted(
    body: impl Fn(&str) -> String + Send + Sync + 'static,
    cache_control: &'static str,
) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/client.json", listener.local_addr().unwrap());
    let document = body(&url);
    let fetched = Arc::new(AtomicUsize::new(0));
    let counted = fetched.clone();
    let app = axum::Router::new().route(
        "/client.json",
        axum::routing::get(move || {
            let document = document.clone();
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                (
                    [
                        ("content-type", "application/json"),
                        ("cache-control", cache_control),
                    ],
                    document,
                )
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, fetched)
}

#[tokio::test]
async fn a_metadata_document_is_kept_as_its_headers_say_and_a_huge_one_is_refused() {
    let app = spawn_app_with(|config| config.oauth_allow_private = true).await;
    let bob = app.add_person("bob").await;
    let document = |url: &str| {
        json!({ "client_id": url, "client_name": "Kept", "redirect_uris": [REDIRECT] }).to_string()
    };
    let (_, challenge) = pkce();
    let show = |client_id: String| {
        let (url, bob, challenge) = (app.url(), bob.clone(), challenge.clone());
        async move {
            let connector = Connector {
                url,
                client_id,
                redirect: REDIRECT.into(),
                resource: None,
            };
            let page = connector
                .consent_page(&connector.authorize_url(&challenge, &[]), &bob)
                .await;
            (page.status().as_u16(), page.text().await.unwrap())
        }
    };
    for (cache_control, fetches) in [("max-age=600", 1), ("no-store", 2)] {
        let (url, fetched) = serve_counted(document, cache_control).await;
        for _ in 0..2 {
            let (status, _) = show(url.clone()).await;
            assert_eq!(status, 200);
        }
        assert_eq!(fetched.load(Ordering::SeqCst), fetches, "{cache_control}");
    }
    let (url, _) = serve_counted(
        |url| {
            json!({
                "client_id": url,
                "client_name": "x".repeat(70 * 1024),
                "redirect_uris": [REDIRECT],
            })
            .to_string()
        },
        "max-age=600",
    )
    .await;
    let (status, text) = show(url).await;
    assert_eq!(status, 400);
    assert!(text.contains("larger than 65536 bytes"), "{text}");
}

#[tokio::test]
async fn a_client_known_by_its_metadata_document_signs_in_and_a_false_one_does_not() {
    let app = spawn_app_with(|config| {
        at_once(config);
        config.oauth_allow_private = true;
    })
    .await;
    let bob = app.add_person("bob").await;
    app.add_person("alice").await;
    let url = serve_document(|url| {
        json!({
            "client_id": url,
            "client_name": "Documented",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
        })
        .to_string()
    })
    .await;
    let connector = Connector {
        url: app.url(),
        client_id: url.clone(),
        redirect: REDIRECT.into(),
        resource: None,
    };
    let (verifier, challenge) = pkce();
    let page = connector
        .consent_page(&connector.authorize_url(&challenge, &[]), &bob)
        .await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("Documented"));
    let answered = connector.answer(&html, &bob, "allow").await;
    let code = query_of(answered.headers()["location"].to_str().unwrap())["code"].clone();
    let (status, tokens) = connector.exchange(&code, &verifier).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(
        peers_as(&app, tokens["access_token"].as_str().unwrap()).await,
        ["bob"]
    );

    // A document whose client_id is not its URL.
    let false_url = serve_document(|_| {
        json!({ "client_id": "https://claude.ai/oauth/claude-code-client-metadata",
                "redirect_uris": [REDIRECT] })
        .to_string()
    })
    .await;
    let false_one = Connector {
        client_id: false_url,
        ..connector
    };
    let refused = false_one
        .consent_page(&false_one.authorize_url(&challenge, &[]), &bob)
        .await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("is not its URL"));

    // Without the operator's leave, a private address is never fetched.
    let guarded = spawn_app().await;
    let bob = guarded.add_person("bob").await;
    for client_id in [
        url.as_str(),
        "https://127.0.0.1:9/client.json",
        "https://10.0.0.1/c",
    ] {
        let private = Connector {
            url: guarded.url(),
            client_id: client_id.to_owned(),
            redirect: REDIRECT.into(),
            resource: None,
        };
        let refused = private
            .consent_page(&private.authorize_url(&challenge, &[]), &bob)
            .await;
        assert_eq!(refused.status(), 400, "{client_id}");
        let text = refused.text().await.unwrap();
        assert!(
            text.contains("private") || text.contains("must be an https:// URL"),
            "{client_id}: {text}"
        );
    }
}

/// How many rows the OAuth tables hold, all of them together.
fn oauth_rows(app: &TestApp) -> i64 {
    app.sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'oauth%'",
        |conn, q| {
            let mut tables = conn.prepare(q).unwrap();
            let names: Vec<String> = tables
                .query_map([], |row| row.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            names
                .iter()
                .map(|name| {
                    conn.query_row(&format!("SELECT count(*) FROM {name}"), [], |row| {
                        row.get::<_, i64>(0)
                    })
                    .unwrap()
                })
                .sum()
        },
    )
}

/// `tokens`' access and refresh tokens.
fn pair(tokens: &Value) -> (String, String) {
    let field = |name: &str| tokens[name].as_str().unwrap().to_owned();
    (field("access_token"), field("refresh_token"))
}

#[tokio::test]
async fn a_refresh_left_the_access_token_it_replaced_working_until_it_expired() {
    let app = spawn_app_with(at_once).await;
    let bob = app.add_person("bob").await;
    app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let (access, refresh) = pair(&connector.sign_in(&bob).await);
    assert_eq!(mcp_status(&app, &access).await, 200);

    let (status, rotated) = connector.refresh(&refresh).await;
    assert_eq!(status, 200, "{rotated}");
    let (next, _) = pair(&rotated);
    assert_eq!(
        mcp_status(&app, &access).await,
        401,
        "replaced: refused at once"
    );
    assert_eq!(peers_as(&app, &next).await, ["bob"]);
}

#[tokio::test]
async fn every_refresh_kept_a_row_and_made_everyones_reload_read_the_grants_whole_history() {
    let app = spawn_app_with(|config| {
        at_once(config);
        config.limits.per_address = None;
    })
    .await;
    let bob = app.add_person("bob").await;
    app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let (_, first) = pair(&connector.sign_in(&bob).await);
    let (status, rotated) = connector.refresh(&first).await;
    assert_eq!(status, 200, "{rotated}");
    let rows = oauth_rows(&app);

    // A day of refreshes, and more: the store holds what it held after one.
    let (mut access, mut refresh) = pair(&rotated);
    for n in 0..300 {
        let (status, rotated) = connector.refresh(&refresh).await;
        assert_eq!(status, 200, "refresh {n}: {rotated}");
        (access, refresh) = pair(&rotated);
    }
    assert_eq!(oauth_rows(&app), rows, "no row per used token");
    assert_eq!(
        app.count("SELECT generation FROM oauth_grants"),
        301,
        "the generation counts the refreshes"
    );
    assert_eq!(mcp_status(&app, &access).await, 200);

    // The first refresh token, from 301 generations ago: someone holds a
    // copy. The grant ends, though no used token was kept.
    let (status, reused) = connector.refresh(&first).await;
    assert_eq!(
        (status, reused["error"].as_str()),
        (400, Some("invalid_grant")),
        "{reused}"
    );
    assert_eq!(mcp_status(&app, &access).await, 401);
    let (status, _) = connector.refresh(&refresh).await;
    assert_eq!(status, 400);
    assert_eq!(app.count("SELECT count(*) FROM oauth_grants"), 0);
}

/// Bob's grant, refreshed twice with the same refresh token (a client that
/// lost the first answer, or whose two refreshes raced): the relay, the
/// connector, and both answers, each a 200.
async fn refreshed_twice() -> (TestApp, Connector, Value, Value) {
    let app = spawn_app_with(at_once).await;
    let bob = app.add_person("bob").await;
    app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let (_, refresh) = pair(&connector.sign_in(&bob).await);
    let (status, once) = connector.refresh(&refresh).await;
    assert_eq!(status, 200, "{once}");
    let (status, twice) = connector.refresh(&refresh).await;
    assert_eq!(status, 200, "a retry within the grace: {twice}");
    (app, connector, once, twice)
}

#[tokio::test]
async fn a_double_refresh_ended_the_grant_instead_of_being_taken_for_a_retry() {
    // The second is a retry, with a pair of its own that supersedes the
    // first's access token.
    let (app, connector, once, twice) = refreshed_twice().await;
    let (first_access, _) = pair(&once);
    let (access, refresh) = pair(&twice);
    assert_ne!(access, first_access);
    assert_eq!(mcp_status(&app, &first_access).await, 401, "superseded");
    assert_eq!(peers_as(&app, &access).await, ["bob"]);
    assert_eq!(app.count("SELECT count(*) FROM oauth_grants"), 1);

    // The grant goes on from the retry's pair.
    let (status, rotated) = connector.refresh(&refresh).await;
    assert_eq!(status, 200, "{rotated}");
    let (access, _) = pair(&rotated);
    assert_eq!(mcp_status(&app, &access).await, 200);

    // Past the grace, the refresh token just replaced is a copy: the
    // grant ends.
    end_the_grace(&app);
    let (status, reused) = connector.refresh(&refresh).await;
    assert_eq!(
        (status, reused["error"].as_str()),
        (400, Some("invalid_grant")),
        "{reused}"
    );
    assert_eq!(mcp_status(&app, &access).await, 401);
    assert_eq!(app.count("SELECT count(*) FROM oauth_grants"), 0);
}

#[tokio::test]
async fn a_participant_removed_from_relay_participants_kept_acting_through_its_grant() {
    const CI: &str = "ci-token-0123456789abcdef";
    let app = spawn_app_with(|config| {
        at_once(config);
        config.settings.participants = vec![(
            crosstalk::model::Handle::parse("ci").unwrap(),
            TokenHash::of(CI),
        )];
    })
    .await;
    app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let tokens = connector.sign_in(CI).await;
    let (access, refresh) = pair(&tokens);
    assert_eq!(mcp_status(&app, &access).await, 200);
    let (status, rotated) = connector.refresh(&refresh).await;
    assert_eq!(status, 200, "{rotated}");
    let (access, refresh) = pair(&rotated);

    // The relay restarts without the participant, at the same address.
    let app = app
        .restart_with(|config| {
            let port = config.listen.port();
            config.public_url = format!("http://127.0.0.1:{port}");
            config.settings.oauth.resource = format!("http://127.0.0.1:{port}/mcp");
        })
        .await;
    assert_eq!(mcp_status(&app, &access).await, 401);
    let (status, refused) = connector.refresh(&refresh).await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (400, Some("invalid_grant")),
        "{refused}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM oauth_grants WHERE handle = 'ci'"),
        0,
        "ended at its refresh"
    );
}

#[tokio::test]
async fn a_person_could_hold_any_number_of_grants() {
    let most = crosstalk::relay::GRANTS_PER_PERSON;
    let app = spawn_app_with(|config| {
        at_once(config);
        config.limits.per_address = None;
    })
    .await;
    let bob = app.add_person("bob").await;
    let alice = app.add_person("alice").await;
    let connector = Connector::register(&app, REDIRECT).await;
    let (alices, _) = pair(&connector.sign_in(&alice).await);
    let mut accesses = Vec::new();
    for _ in 0..=most {
        accesses.push(pair(&connector.sign_in(&bob).await).0);
    }
    assert_eq!(
        app.count("SELECT count(*) FROM oauth_grants WHERE handle = 'bob'"),
        i64::from(most)
    );
    // The least recently used went; the others, and another's, stay.
    assert_eq!(mcp_status(&app, &accesses[0]).await, 401);
    for access in &accesses[1..] {
        assert_eq!(mcp_status(&app, access).await, 200);
    }
    assert_eq!(mcp_status(&app, &alices).await, 200);
    let (_, settings) = page(&app, "/settings", &bob).await;
    assert_eq!(
        settings.matches("action=\"/settings/grants/").count(),
        most as usize,
        "the settings page lists them"
    );
}

#[tokio::test]
async fn a_client_that_kept_the_first_of_two_racing_refreshes_lost_its_grant() {
    // Two refreshes with the same token race; the client keeps the answer
    // that came first.
    let (app, connector, first, second) = refreshed_twice().await;
    let (first_access, kept) = pair(&first);
    assert_eq!(mcp_status(&app, &first_access).await, 401, "superseded");
    // Its refresh token goes on: the grant with it.
    let (status, rotated) = connector.refresh(&kept).await;
    assert_eq!(status, 200, "{rotated}");
    let (access, _) = pair(&rotated);
    assert_eq!(peers_as(&app, &access).await, ["bob"]);
    // The other answer's refresh token, once one of the two was used, is
    // a copy: the grant ends.
    let (_, other) = pair(&second);
    let (status, reused) = connector.refresh(&other).await;
    assert_eq!(
        (status, reused["error"].as_str()),
        (400, Some("invalid_grant")),
        "{reused}"
    );
    assert_eq!(mcp_status(&app, &access).await, 401);
    assert_eq!(app.count("SELECT count(*) FROM oauth_grants"), 0);
}
