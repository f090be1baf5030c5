//! The team page over HTTP: its forms and their guard, its headers, its
//! error pages, signing out, search on every path, and a thread's stream.

use crate::support::{SseReader, TestApp, browser, get, http, page, post, spawn_app, visit};
use serde_json::{Value, json};

/// The form token on a page.
fn form_token(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form token") + 19;
    html[at..].split('"').next().unwrap().to_owned()
}

/// Posts a form as a browser on the page would, with `headers` on top.
async fn submit(
    app: &TestApp,
    path: &str,
    token: &str,
    form: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = browser()
        .post(format!("{}{path}", app.url()))
        .basic_auth("x", Some(token))
        .form(form);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// A thread between alice and bob, opened by bob.
async fn thread(app: &TestApp, bob: &str) -> i64 {
    let (status, sent) = post(
        app,
        "/api/messages",
        bob,
        json!({ "to": "alice", "body": "which migration?" }),
    )
    .await;
    assert_eq!(status, 201, "{sent}");
    sent["thread_id"].as_i64().unwrap()
}

#[tokio::test]
async fn a_form_from_anywhere_but_the_page_is_refused_and_stores_nothing() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let id = thread(&app, &bob).await;
    let path = format!("/threads/{id}");
    let (_, html) = page(&app, &path, &alice).await;
    let alices = form_token(&html);
    let (_, html) = page(&app, &path, &bob).await;
    let bobs = form_token(&html);
    assert_ne!(alices, bobs, "a form token belongs to one person");
    let stored = || async { app.rest(&bob).stored_messages().await };
    assert_eq!(stored().await, 1);

    let own_origin = app.url();
    type Fields<'a> = Vec<(&'a str, &'a str)>;
    let refusals: [(&str, Fields, Fields); 4] = [
        ("no token", vec![("body", "hi")], vec![]),
        (
            "another person's token",
            vec![("body", "hi"), ("csrf", &bobs)],
            vec![],
        ),
        (
            "a foreign Origin",
            vec![("body", "hi"), ("csrf", &alices)],
            vec![("origin", "https://evil.example")],
        ),
        (
            "Sec-Fetch-Site: cross-site",
            vec![("body", "hi"), ("csrf", &alices)],
            vec![("sec-fetch-site", "cross-site")],
        ),
    ];
    for (case, form, headers) in refusals {
        let response = submit(&app, &path, &alice, &form, &headers).await;
        let status = response.status().as_u16();
        assert!(
            status == 403 || status == 422,
            "{case}: {status} {}",
            response.text().await.unwrap()
        );
        assert_eq!(stored().await, 1, "{case}: nothing is stored");
    }
    // A missing token is refused as the form is read (422); the others as
    // the guard checks them (403).
    let wrong = submit(&app, &path, &alice, &[("body", "hi"), ("csrf", &bobs)], &[]).await;
    assert_eq!(wrong.status(), 403);
    assert!(wrong.text().await.unwrap().contains("reload the page"));

    // From the page itself, it goes through: a redirect to the new message.
    let sent = submit(
        &app,
        &path,
        &alice,
        &[("body", "migration **0042**"), ("csrf", &alices)],
        &[("origin", &own_origin), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(sent.status(), 303);
    let location = sent.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, format!("/threads/{id}#m2"));
    let inbox = get(&app, "/api/inbox", &bob).await.1;
    assert_eq!(inbox["messages"][0]["from"], "alice");
    assert_eq!(inbox["messages"][0]["body"], "migration **0042**");

    // Any other method is refused.
    let put = browser()
        .put(format!("{}{path}", app.url()))
        .basic_auth("x", Some(&alice))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 405);
    assert_eq!(stored().await, 2);
}

/// Every form of the page (a reply, a channel post, a new conversation, a
/// status) refuses a write that did not come from the page: no token,
/// another person's, a foreign Origin, a cross-site fetch. Nothing is
/// stored, as the relay's own API shows; the same form from the page
/// goes through.
#[tokio::test]
async fn every_page_form_refuses_a_write_from_anywhere_but_the_page() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let id = thread(&app, &bob).await;
    app.rest(&bob).post_in("ops", "hello").await;
    // Leaked, to live as long as the forms that carry them.
    let alices: &'static str = form_token(&page(&app, "/", &alice).await.1).leak();
    let bobs: &'static str = form_token(&page(&app, "/", &bob).await.1).leak();
    let reply = format!("/threads/{id}");
    let forms: [(&str, Vec<(&str, &str)>); 4] = [
        (&reply, vec![("body", "zanzibar reply")]),
        ("/channels/ops", vec![("body", "zanzibar post")]),
        ("/new", vec![("to", "bob"), ("body", "zanzibar start")]),
        ("/status", vec![("status", "zanzibar")]),
    ];
    // What alice's writes would change, read through the API.
    let seen = async || {
        let found = app.rest(&bob).search("zanzibar").await;
        let people = get(&app, "/api/people", &bob).await.1;
        let status = people["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["handle"] == "alice")
            .map(|p| p["status"].clone());
        (found.len(), status)
    };
    let before = seen().await;
    assert_eq!(before.0, 0);
    for (path, fields) in &forms {
        let with = |csrf: Option<&'static str>| {
            let mut form = fields.clone();
            form.extend(csrf.map(|token| ("csrf", token)));
            form
        };
        type Fields<'a> = Vec<(&'a str, &'a str)>;
        let refusals: [(&str, Fields, Fields); 4] = [
            ("no token", with(None), vec![]),
            ("another person's token", with(Some(bobs)), vec![]),
            (
                "a foreign Origin",
                with(Some(alices)),
                vec![("origin", "https://evil.example")],
            ),
            (
                "Sec-Fetch-Site: cross-site",
                with(Some(alices)),
                vec![("sec-fetch-site", "cross-site")],
            ),
        ];
        for (case, form, headers) in refusals {
            let response = submit(&app, path, &alice, &form, &headers).await;
            let status = response.status().as_u16();
            assert!(
                status == 403 || status == 422,
                "{path}, {case}: {status} {}",
                response.text().await.unwrap()
            );
            assert_eq!(seen().await, before, "{path}, {case}: nothing is stored");
        }
    }
    // From the page, each goes through: the refusals above were the guard's.
    let own_origin = app.url();
    for (path, fields) in &forms {
        let mut form = fields.clone();
        form.push(("csrf", alices));
        let headers = [
            ("origin", own_origin.as_str()),
            ("sec-fetch-site", "same-origin"),
        ];
        let response = submit(&app, path, &alice, &form, &headers).await;
        assert_eq!(response.status(), 303, "{path}");
    }
    let after = seen().await;
    assert_eq!(after.0, 3, "the reply, the post and the new conversation");
    assert_eq!(after.1, Some(json!("zanzibar")));
}

#[tokio::test]
async fn a_refused_form_shows_why_and_keeps_the_text() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    app.rest(&alice).post_in("ops", "hello").await;
    let (_, html) = page(&app, "/channels/ops", &alice).await;
    let csrf = form_token(&html);
    let pasted = "deploy with AKIAIOSFODNN7EXAMPLE <b>now</b>";

    // Without script: the page again, with the reason and the text.
    let response = submit(
        &app,
        "/channels/ops",
        &alice,
        &[("body", pasted), ("csrf", &csrf), ("kind", "NOTE")],
        &[],
    )
    .await;
    assert_eq!(response.status(), 422);
    let html = response.text().await.unwrap();
    assert!(html.contains("AWS access key"), "{html}");
    assert!(
        html.contains("deploy with AKIAIOSFODNN7EXAMPLE &#60;b&#62;now&#60;/b&#62;</textarea>"),
        "the text is kept, escaped: {html}"
    );

    // With script: the reason, for the page to show.
    let response = submit(
        &app,
        "/channels/ops",
        &alice,
        &[("body", pasted), ("csrf", &csrf)],
        &[("x-requested-with", "fetch")],
    )
    .await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["refused"]["code"], "secret_refused");
    assert_eq!(app.rest(&alice).stored_messages().await, 1);

    // And a good one from script: 201 and where it is.
    let response = submit(
        &app,
        "/channels/ops",
        &alice,
        &[("body", "deployed"), ("csrf", &csrf), ("to", "alice")],
        &[("x-requested-with", "fetch")],
    )
    .await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["location"], "/channels/ops#m2");
    let inbox = get(&app, "/api/inbox", &alice).await.1;
    assert_eq!(inbox["messages"][0]["body"], "deployed");
}

#[tokio::test]
async fn a_new_conversation_and_a_status_from_the_page() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (_, html) = page(&app, "/?to=bob", &alice).await;
    assert!(html.contains("<option value=\"bob\" selected>"), "{html}");
    let csrf = form_token(&html);
    let started = submit(
        &app,
        "/new",
        &alice,
        &[
            ("to", "bob"),
            ("kind", "QUESTION"),
            ("body", "got a minute?"),
            ("csrf", &csrf),
        ],
        &[],
    )
    .await;
    assert_eq!(started.status(), 303);
    let inbox = get(&app, "/api/inbox", &bob).await.1;
    let message = &inbox["messages"][0];
    assert_eq!(
        (&message["from"], &message["type"]),
        (&json!("alice"), &json!("QUESTION"))
    );
    assert_eq!(
        started.headers()["location"].to_str().unwrap(),
        format!("/threads/{}#m{}", message["thread_id"], message["id"])
    );

    let set = submit(
        &app,
        "/status",
        &alice,
        &[("status", "on call"), ("csrf", &csrf)],
        &[],
    )
    .await;
    assert_eq!(set.status(), 303);
    let people = get(&app, "/api/people", &bob).await.1;
    let me = people["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["handle"] == "alice")
        .unwrap();
    assert_eq!(me["status"], "on call");
}

#[tokio::test]
async fn every_page_carries_the_security_headers_and_fails_as_a_page() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let id = thread(&app, &app.add_person("bob").await).await;
    let (_, html) = page(&app, "/", &alice).await;
    let css = html
        .split("<link rel=\"stylesheet\" href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let js = html
        .split("<script src=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        css.starts_with("/static/app.") && css.ends_with(".css"),
        "{css}"
    );

    for (path, status) in [
        ("/".to_owned(), 200),
        (format!("/threads/{id}"), 200),
        ("/search?q=migration".to_owned(), 200),
        ("/threads/999".to_owned(), 404),
        ("/channels/nothing-here".to_owned(), 404),
    ] {
        let response = visit(&app, &path, &alice).send().await.unwrap();
        assert_eq!(response.status(), status, "{path}");
        let headers = response.headers();
        assert_eq!(
            headers["content-security-policy"],
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self'; manifest-src 'self'; worker-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["referrer-policy"], "same-origin");
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["cross-origin-opener-policy"], "same-origin");
        assert_eq!(headers["cross-origin-resource-policy"], "same-origin");
        assert!(
            headers.get("strict-transport-security").is_none(),
            "plain HTTP: no HSTS"
        );
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html"),
            "{path}"
        );
        let body = response.text().await.unwrap();
        if status == 404 {
            assert!(body.contains("<h1>Not Found</h1>"), "{body}");
        }
    }

    for asset in [css, js] {
        let response = http()
            .get(format!("{}{asset}", app.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{asset}");
        assert_eq!(
            response.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
    }
    let stale = http()
        .get(format!("{}/static/app.0000000000.css", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 404);
}

#[tokio::test]
async fn signing_out_refuses_that_credential_until_signing_in_again() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let out = visit(&app, "/signout", &alice).send().await.unwrap();
    assert_eq!(out.status(), 401);
    assert!(
        out.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic realm=")
    );
    let cookie = out.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    assert!(cookie.starts_with("crosstalk_signed_out="), "{cookie}");

    let with_cookie = |path: &str| visit(&app, path, &alice).header("cookie", &cookie);
    let refused = with_cookie("/").send().await.unwrap();
    assert_eq!(
        refused.status(),
        401,
        "the signed-out credential is refused"
    );
    // Another person's credential on the same browser is not.
    let bob = app.add_person("bob").await;
    let other = visit(&app, "/", &bob)
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    // Signing in again forgets the mark and asks for credentials.
    let again = with_cookie("/signin").send().await.unwrap();
    assert_eq!(again.status(), 401);
    assert!(
        again.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let back = visit(&app, "/signin", &alice).send().await.unwrap();
    assert_eq!(back.status(), 303);
}

#[tokio::test]
async fn search_finds_live_messages_by_their_words_on_every_path() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "the deploy of billing failed" }),
    )
    .await;
    post(
        &app,
        "/api/messages",
        &bob,
        json!({ "to": "alice", "body": "Is billing back? <b>asking</b>" }),
    )
    .await;
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "lunch?" }),
    )
    .await;
    let gone = post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "billing secret plan" }),
    )
    .await
    .1;
    // One expires: it is never found again.
    app.sql(
        &format!(
            "UPDATE messages SET expires_at = 1 WHERE id = {}",
            gone["id"]
        ),
        |conn, sql| conn.execute(sql, []).unwrap(),
    );

    // REST: newest first, every word must match, the last as a prefix.
    let (status, found) = get(&app, "/api/search?q=bill", &bob).await;
    assert_eq!(status, 200, "{found}");
    let bodies: Vec<&str> = found["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(
        bodies,
        [
            "Is billing back? <b>asking</b>",
            "the deploy of billing failed"
        ]
    );
    assert_eq!(found["messages"][1]["channel"], "ops");
    assert_eq!(
        found["messages"][1]["excerpt"],
        "the deploy of billing failed"
    );
    let narrowed = get(&app, "/api/search?q=billing%20deploy", &bob).await.1;
    assert_eq!(narrowed["messages"].as_array().unwrap().len(), 1);
    // Pages: one at a time, with a cursor.
    let first = get(&app, "/api/search?q=billing&limit=1", &bob).await.1;
    assert_eq!(first["messages"].as_array().unwrap().len(), 1);
    let before = first["next_before"].as_i64().unwrap();
    let second = get(
        &app,
        &format!("/api/search?q=billing&limit=1&before={before}"),
        &bob,
    )
    .await
    .1;
    assert_eq!(
        second["messages"][0]["body"],
        "the deploy of billing failed"
    );
    // Query syntax is only words: nothing to inject, and nothing breaks.
    let odd = get(&app, "/api/search?q=%22billing%20OR%20*%20NEAR(", &bob).await;
    assert_eq!(odd.0, 200, "{}", odd.1);
    let (status, empty) = get(&app, "/api/search?q=%20", &bob).await;
    assert_eq!(
        (status, &empty["error"]["code"]),
        (400, &json!("bad_request"))
    );

    // MCP: the same search.
    let agent = app.mcp(&bob).await;
    let found = agent
        .call("search_messages", json!({ "query": "billing" }))
        .await
        .ok();
    assert_eq!(found["messages"].as_array().unwrap().len(), 2);
    assert!(!found.to_string().contains("secret plan"));

    // The page: the words marked, the markup escaped.
    let (status, html) = page(&app, "/search?q=billing", &alice).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("<mark>billing</mark> back? &#60;b&#62;asking"),
        "{html}"
    );
    assert!(!html.contains("secret plan"));
}

#[tokio::test]
async fn a_thread_streams_live_and_resumes_after_the_last_event() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let id = thread(&app, &bob).await;
    let url = format!("{}/api/threads/{id}/stream", app.url());
    let mut stream = SseReader::new(http().get(&url).bearer_auth(&alice).send().await.unwrap());
    assert_eq!(stream.next().await.event.as_deref(), Some("notice"));
    let question = stream.message().await;
    assert_eq!(question["body"], "which migration?");
    assert_eq!(question["delivery"], json!({ "state": "waiting" }));
    // Alice's agent reads it: the stream says where it stands now.
    get(&app, "/api/inbox", &alice).await;
    let delivery = |event: crate::support::SseEvent, state: &str| {
        assert_eq!(event.event.as_deref(), Some("delivery"), "{event:?}");
        assert_eq!(event.id, None, "an update moves no cursor");
        let update: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(
            (&update["id"], &update["delivery"]["state"]),
            (&question["id"], &json!(state))
        );
    };
    delivery(stream.next().await, "read");
    post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "thread_id": id, "body": "0042" }),
    )
    .await;
    // Another thread's message never shows on this one.
    thread(&app, &bob).await;
    post(
        &app,
        "/api/messages",
        &bob,
        json!({ "to": "alice", "thread_id": id, "body": "thanks" }),
    )
    .await;
    let live = stream.message().await;
    assert_eq!(live["body"], "0042");
    delivery(stream.next().await, "answered");
    // Bob's reply answers nothing: his agent was never shown 0042.
    assert_eq!(stream.message().await["body"], "thanks");
    drop(stream);

    let resumed = http()
        .get(&url)
        .bearer_auth(&alice)
        .header("last-event-id", live["id"].to_string())
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(resumed);
    stream.next().await;
    assert_eq!(stream.message().await["body"], "thanks");

    let unknown = http()
        .get(format!("{}/api/threads/999/stream", app.url()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}

/// What the page fetches when its stream says a message came: only the
/// thread's messages after the last it shows, rendered.
#[tokio::test]
async fn a_threads_new_messages_come_alone() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let id = thread(&app, &bob).await;
    let mut ids = Vec::new();
    for body in ["0042, I think", "thanks"] {
        let (_, sent) = post(
            &app,
            "/api/messages",
            &bob,
            json!({ "to": "alice", "thread_id": id, "body": body }),
        )
        .await;
        ids.push(sent["message_id"].as_i64().unwrap());
    }
    let (status, html) = page(
        &app,
        &format!("/threads/{id}/messages?after={}", ids[0]),
        &alice,
    )
    .await;
    assert_eq!(status, 200);
    assert!(html.contains("thanks"), "{html}");
    assert!(
        !html.contains("which migration?") && !html.contains("0042"),
        "{html}"
    );
    let (_, none) = page(
        &app,
        &format!("/threads/{id}/messages?after={}", ids[1]),
        &alice,
    )
    .await;
    assert!(!none.contains("thanks"), "{none}");
}

#[tokio::test]
async fn a_thread_page_shows_where_each_addressed_message_stands() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let id = thread(&app, &bob).await;
    let path = format!("/threads/{id}");
    let shown = |html: &str| {
        html.split("<span class=\"delivery ")
            .nth(1)
            .and_then(|rest| rest.split("</span>").next())
            .unwrap_or_default()
            .to_owned()
    };
    let (_, html) = page(&app, &path, &bob).await;
    assert_eq!(shown(&html), "delivery-waiting\" data-to=\"ALICE\">waiting");
    // Offered to alice's inbox stream: shown to her agent.
    let stream = http()
        .get(format!("{}/api/inbox/stream", app.url()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(stream);
    stream.next().await;
    stream.message().await;
    let (_, html) = page(&app, &path, &bob).await;
    assert_eq!(
        shown(&html),
        "delivery-pushed\" data-to=\"ALICE\">shown to ALICE&#39;s agent on its stream"
    );
    // Alice reading the page is not her agent reading it.
    page(&app, &path, &alice).await;
    let (_, html) = page(&app, &path, &bob).await;
    assert!(shown(&html).starts_with("delivery-pushed"));
    // Her agent answers: answered.
    post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "thread_id": id, "body": "0042" }),
    )
    .await;
    let (_, html) = page(&app, &path, &bob).await;
    assert_eq!(
        shown(&html),
        "delivery-answered\" data-to=\"ALICE\">answered"
    );
}

#[tokio::test]
async fn a_form_behind_a_proxy_that_terminates_tls_is_the_pages_own() {
    // The relay speaks plain HTTP behind the proxy; people reach it at
    // RELAY_PUBLIC_URL, so their browser's Origin is that one, https.
    // (A participant, so a relay with a public name has a credential.)
    let app = crate::support::spawn_app_with_flags(&[
        "--public-url",
        "https://relay.example.com",
        "--participants",
        "ci:ci-token-0123456789abcdefghijklmnopqrstuv",
    ])
    .await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let id = thread(&app, &bob).await;
    let path = format!("/threads/{id}");
    let proxied = [("host", "relay.example.com")];
    let html = browser()
        .get(format!("{}{path}", app.url()))
        .basic_auth("x", Some(&alice))
        .header("host", "relay.example.com")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let token = form_token(&html);
    let form = [("body", "through the proxy"), ("csrf", token.as_str())];
    let from = |origin: &'static str| {
        let mut headers = proxied.to_vec();
        headers.extend([("origin", origin), ("sec-fetch-site", "same-origin")]);
        headers
    };
    let sent = submit(
        &app,
        &path,
        &alice,
        &form,
        &from("https://relay.example.com"),
    )
    .await;
    assert_eq!(sent.status(), 303, "{}", sent.text().await.unwrap());
    // Still only the page's own.
    let refused = submit(&app, &path, &alice, &form, &from("https://evil.example")).await;
    assert_eq!(refused.status(), 403);
    let inbox = get(&app, "/api/inbox", &bob).await.1;
    assert_eq!(inbox["messages"][0]["body"], "through the proxy");
}
