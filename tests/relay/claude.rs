//! The real Claude Code CLI (pinned in `tests/clients/package.json`), run
//! as a teammate runs it: interactive, in tmux, with a fresh HOME, the
//! bridge entry `crosstalk add` prints in the project's `.mcp.json` (or the
//! `crosstalk` plugin from this repository's marketplace), and its default
//! protocol negotiation. Its model is a fake Anthropic Messages API on
//! loopback that streams the real event format, records what the model is
//! sent, and answers a `<channel>` event the way a model would: it finds
//! crosstalk's `send_message` with Claude Code's tool search (a fresh
//! session defers MCP tools) and answers in the thread.
//!
//! Offline, Claude Code's remote feature flags are absent; the test seeds
//! what the online flags give (`cachedGrowthBookFeatures` in
//! `~/.claude.json`: `tengu_harbor`, channels on; `tengu_harbor_permissions`,
//! the permission relay on; `tengu_harbor_ledger`, the allowlist of channel
//! plugins, naming this repository's plugin). It
//! also accepts what a new user accepts once: onboarding, the API key, the
//! folder's trust, the project's MCP server.
//!
//! Needs `tmux` and `npm ci --prefix tests/clients` (`.ci/run` does both),
//! so it is `#[ignore]`d: a plain `cargo test` reports it as ignored.
//!
//! Rerun: `npm ci --prefix tests/clients && cargo test --test relay claude -- --ignored`.

use crate::support::{Mcp, TestApp, get, id_of, spawn_app};
use crate::terminal::{PATIENCE, Terminal};
use axum::{Json, Router, extract::State, response::IntoResponse, routing::post};
use serde_json::{Value, json};
use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// The pinned CLI. (The test is `#[ignore]`d, saying what it needs: where
/// that is missing, it fails.)
fn claude_code() -> PathBuf {
    build(Build::Npm)
}

/// The two builds people run: the npm wrapper's (2.1.332,
/// `tests/clients/package.json`) and the native one their installers fetch
/// today (2.1.335, `tests/clients/native/package.json`).
#[derive(Clone, Copy, Debug)]
enum Build {
    Npm,
    Native,
}

fn build(which: Build) -> PathBuf {
    let dir = match which {
        Build::Npm => "tests/clients/node_modules",
        Build::Native => "tests/clients/native/node_modules",
    };
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join("@anthropic-ai/claude-code-linux-x64/claude");
    let tmux = Command::new("tmux").arg("-V").output().is_ok();
    assert!(
        installed.exists() && tmux,
        "Claude Code {which:?} (npm ci --prefix tests/clients, and --prefix \
         tests/clients/native) or tmux (apt-get install tmux) is not installed (.ci/run \
         installs them)"
    );
    installed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients); cargo test -- --ignored"]
async fn without_a_channel_flag_the_npm_build_is_woken_asks_and_answers() {
    without_a_channel_flag(Build::Npm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients/native); cargo test -- --ignored"]
async fn without_a_channel_flag_the_native_build_is_woken_asks_and_answers() {
    without_a_channel_flag(Build::Native).await;
}

/// Claude Code as people start it, the plugin installed from this
/// repository's marketplace and no channel flag: an idle session is woken
/// by alice's question and answers in the thread; one asked during a slow
/// turn the person started answers before the session is idle; a step
/// that needs permission is asked on the relay, allowed there and run, or
/// denied and not run. Each message's ledger names its path.
async fn without_a_channel_flag(which: Build) {
    let claude = build(which);
    let app = crate::attention::relay().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let mut told = crate::attention::Hook::start().await;
    let (status, _) = app
        .rest(&bob_token)
        .put(
            "/api/me/notifications",
            json!({ "webhook": format!("{}/bob", told.url) }),
        )
        .await;
    assert_eq!(status, 200);
    let model = FakeModel::start().await;
    let mut bob = ClaudeCode::new(&claude, &model, &app, &bob_token, Install::PluginNoFlag);
    bob.start();
    until_reachable(&app, "bob", &bob).await;
    let alice = Mcp::connect(&app.url(), &alice_token).await.unwrap();

    // Idle, nobody typing.
    let sent = ask(&alice, &model, "which port does staging use?").await;
    let (id, thread_id) = (id_of(&sent, "message_id"), id_of(&sent, "thread_id"));
    answered_in_thread(&sent["reply"], id, thread_id);
    let shown = model
        .channel_turn(id)
        .expect("the model was shown the question");
    assert!(
        shown.contains(&format!(
            "<channel source=\"crosstalk\" delivery_state=\"pushed\" from=\"alice\" \
             message_id=\"{id}\" thread_id=\"{thread_id}\" to=\"bob\" type=\"NOTE\">"
        )),
        "{shown}"
    );
    assert!(
        shown.contains("answer with crosstalk's send_message tool"),
        "{shown}"
    );
    let delivery = delivery_of(&app, id, &alice_token).await;
    assert_eq!(delivery["state"], "answered", "{delivery}");
    assert_eq!(delivery["via"], "wake", "{delivery}");

    // A second question, once the session went idle again.
    until_reachable(&app, "bob", &bob).await;
    let sent = ask(&alice, &model, "and which database?").await;
    answered_in_thread(
        &sent["reply"],
        id_of(&sent, "message_id"),
        id_of(&sent, "thread_id"),
    );

    // During a slow turn bob started: answered before the session is idle.
    until_reachable(&app, "bob", &bob).await;
    bob.type_prompt("Please run: sleep 4 && echo slept");
    model.until_running("sleep 4").await;
    let sent = ask(&alice, &model, "asked while you were busy").await;
    let id = id_of(&sent, "message_id");
    answered_in_thread(&sent["reply"], id, id_of(&sent, "thread_id"));
    let turn = model.turn_showing(id).expect("the model was shown it");
    let shown = turn
        .iter()
        .rposition(|m| text_of(m).contains(&format!("message_id=\"{id}\"")));
    let slept = turn
        .iter()
        .rposition(|m| m.to_string().contains("\"slept\""));
    assert!(
        matches!((slept, shown), (Some(slept), Some(shown)) if slept + 1 == shown),
        "shown right after the slow step's result, in the same turn: {turn:?}"
    );

    // Approvals on the relay.
    until_reachable(&app, "bob", &bob).await;
    allowed_and_denied(&app, &alice, &bob_token, &mut told, &bob).await;
    bob.stop();
}

/// `crosstalk connect claude` sets Claude Code up in one command: run
/// twice it changes nothing, `--print` changes nothing and shows the token
/// masked, the token is in a private file outside the project, and a
/// session started with neither variable in its environment is woken by
/// a teammate's question and answers it.
/// Alice claims a part of the repository; bob's Claude Code (the plugin,
/// no flag) is asked to edit a file in it: the plugin's PreToolUse hook
/// refuses the edit, the model is told whose claim it is, and the file is
/// as it was. A file nobody claimed it edits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients); cargo test -- --ignored"]
async fn the_plugin_keeps_claude_code_from_editing_a_file_a_teammate_claimed() {
    edit_guarded(Build::Npm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients/native); cargo test -- --ignored"]
async fn the_plugin_keeps_the_native_build_from_editing_a_file_a_teammate_claimed() {
    edit_guarded(Build::Native).await;
}

async fn edit_guarded(which: Build) {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let (status, made) = app
        .rest(&alice)
        .post(
            "/api/claims",
            json!({ "what": "src/store/**", "repo": "https://github.com/org/app",
                    "note": "moving the schema" }),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let model = FakeModel::start().await;
    let mut bob = ClaudeCode::new(
        &build(which),
        &model,
        &app,
        &bob_token,
        Install::PluginNoFlag,
    );
    for args in [
        vec!["init", "--quiet"],
        vec!["remote", "add", "origin", "git@github.com:org/app.git"],
    ] {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(&bob.project)
            .args(&args)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let claimed = bob.project.join("src/store/mod.rs");
    std::fs::create_dir_all(claimed.parent().unwrap()).unwrap();
    std::fs::write(&claimed, "original\n").unwrap();
    bob.start();
    until_reachable(&app, "bob", &bob).await;

    bob.type_prompt(&format!("Please edit: {}", claimed.display()));
    let refused = model.until_result_of("Edit").await;
    let said = refused.to_string();
    assert_eq!(refused["is_error"], true, "{said}");
    for named in ["claimed by alice", "src/store/**", "moving the schema"] {
        assert!(said.contains(named), "{named} in {said}\n{}", bob.logs());
    }
    assert_eq!(std::fs::read_to_string(&claimed).unwrap(), "original\n");
    bob.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients); cargo test -- --ignored"]
async fn connect_claude_sets_up_a_session_that_is_woken_with_no_flag() {
    use std::os::unix::fs::PermissionsExt;
    let claude = claude_code();
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let model = FakeModel::start().await;
    let mut bob = ClaudeCode::new(&claude, &model, &app, &bob_token, Install::Connect);
    let settings = bob.home.path().join(".claude/settings.json");
    let first = std::fs::read(&settings).unwrap();
    let written: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(written["env"]["CROSSTALK_TOKEN"], bob_token.as_str());
    assert_eq!(written["env"]["CROSSTALK_URL"], app.url());
    assert_eq!(
        written["enableAllProjectMcpServers"], true,
        "kept: {written}"
    );
    assert_eq!(
        written["enabledPlugins"]["crosstalk@crosstalk"], true,
        "{written}"
    );
    let mode = std::fs::metadata(&settings).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let mut with_token = bob.env.clone();
    with_token.push(("CROSSTALK_URL".into(), app.url()));
    with_token.push(("CROSSTALK_TOKEN".into(), bob_token.clone()));
    for extra in [None, Some("--print")] {
        let done = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .args(["connect", "claude", "--program"])
            .arg(&claude)
            .args(extra)
            .env_clear()
            .envs(with_token.iter().cloned())
            .current_dir(&bob.project)
            .output()
            .unwrap();
        assert!(done.status.success(), "{done:?}");
        assert_eq!(
            std::fs::read(&settings).unwrap(),
            first,
            "{extra:?} changed it"
        );
        let said = String::from_utf8_lossy(&done.stdout);
        assert!(
            !said.contains(&bob_token),
            "{extra:?} printed the token: {said}"
        );
        if extra.is_some() {
            assert!(
                said.contains("claude plugin install crosstalk@crosstalk"),
                "{said}"
            );
        }
    }
    let in_project = Command::new("grep")
        .args(["-r", "-l", &bob_token])
        .arg(&bob.project)
        .output()
        .unwrap();
    assert!(in_project.stdout.is_empty(), "the token in the project");

    bob.start();
    until_reachable(&app, "bob", &bob).await;
    let alice = Mcp::connect(&app.url(), &alice_token).await.unwrap();
    let sent = ask(&alice, &model, "connected?").await;
    answered_in_thread(
        &sent["reply"],
        id_of(&sent, "message_id"),
        id_of(&sent, "thread_id"),
    );
    bob.stop();
}

/// A session that cannot show a push (the bridge in `.mcp.json`, no
/// channel flag, no plugin): once Claude Code has connected to the
/// bridge, nothing calls bob reachable, and alice's question waits, never
/// `pushed`. (The bridge before this proved Claude Code listened within
/// 100 ms of connecting, and pushed; the test gives it two seconds.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients); cargo test -- --ignored"]
async fn a_session_that_cannot_show_a_push_leaves_the_question_waiting() {
    let claude = claude_code();
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let model = FakeModel::start().await;
    let mut bob = ClaudeCode::new(&claude, &model, &app, &bob_token, Install::McpJsonNoFlag);
    bob.start();
    bob.until_log("Connection established with capabilities");
    let alice = Mcp::connect(&app.url(), &alice_token).await.unwrap();
    let sent = send(&alice, "can you see this?").await;
    let relay = app.running.state.relay.clone();
    let mut parked = relay.parked_waits();
    let reached = tokio::time::timeout(Duration::from_secs(2), async {
        while !relay.reachable().iter().any(|h| h.as_str() == "bob") {
            parked.changed().await.unwrap();
        }
    })
    .await;
    assert!(reached.is_err(), "bob was called reachable by push");
    let delivery = delivery_of(&app, id_of(&sent, "message_id"), &alice_token).await;
    assert_eq!(delivery["state"], "waiting", "{delivery}");
    let (_, people) = get(&app, "/api/people", &alice_token).await;
    let bob_peer = people["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["handle"] == "bob")
        .cloned()
        .unwrap();
    assert_eq!(bob_peer["reachable_by_push"], false, "{people}");
    bob.stop();
}

/// Alice asks bob's agent to run a command that writes a file, then
/// another; Claude Code asks before each, in its terminal and on the
/// relay; bob allows the first there and it runs, its output reaching
/// alice, and denies the second, which does not run.
async fn allowed_and_denied(
    app: &TestApp,
    alice: &Mcp,
    bob_token: &str,
    told: &mut crate::attention::Hook,
    bob: &ClaudeCode,
) {
    for (command, behavior, printed) in [
        // (A step that writes: Claude Code runs a plain `echo` unasked.)
        ("touch allowed && echo allowed-$((6*7))", "allow", true),
        ("touch denied && echo denied-$((6*7))", "deny", false),
    ] {
        let sent = send(alice, &format!("Please run: {command}")).await;
        let asked = until_approval(app, bob_token, told, bob).await;
        // The terminal asks too, meanwhile: whoever answers first decides.
        bob.until_screen("Do you want to proceed?");
        assert_eq!(asked["tool_name"], "Bash", "{asked}");
        assert!(
            asked["input_preview"]
                .as_str()
                .is_some_and(|p| p.contains(command)),
            "the step, as Claude Code shows it: {asked}"
        );
        let (status, answered) = app
            .rest(bob_token)
            .post(
                &format!("/api/approvals/{}", asked["id"]),
                json!({ "behavior": behavior }),
            )
            .await;
        assert_eq!(status, 200, "{answered}");
        let reply = reply_in_inbox(alice).await;
        let id = id_of(&sent, "message_id");
        let body = reply["body"].as_str().unwrap_or_default();
        assert!(
            body.starts_with(&format!("answer to {id}: ")),
            "{reply}\n{}",
            bob.logs()
        );
        let output = command
            .split("echo ")
            .nth(1)
            .unwrap()
            .replace("$((6*7))", "42");
        assert_eq!(body.contains(&output), printed, "{behavior}: {body}");
        let file = command.split_whitespace().nth(1).unwrap();
        assert_eq!(bob.project.join(file).exists(), printed, "{behavior}");
    }
}

/// The approval the person was just told of (their webhook), as their
/// approvals list it.
async fn until_approval(
    app: &TestApp,
    token: &str,
    told: &mut crate::attention::Hook,
    claude: &ClaudeCode,
) -> Value {
    let Some((_, notice)) = told.within(PATIENCE).await else {
        panic!(
            "bob was never asked to approve the step; the screen:\n{}\n{}",
            claude.screen(),
            claude.logs()
        );
    };
    assert_eq!(notice["type"], "approval", "{notice}");
    let (_, pending) = app.rest(token).get("/api/approvals").await;
    let asked = pending["approvals"][0].clone();
    assert_eq!(asked["id"], notice["approval_id"], "{pending}");
    asked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients); cargo test -- --ignored"]
async fn a_teammate_s_question_reaches_the_real_claude_code_and_its_answer_comes_back() {
    through_channels(Build::Npm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients/native); cargo test -- --ignored"]
async fn through_channels_the_native_build_asks_and_answers() {
    through_channels(Build::Native).await;
}

/// With the channel flag: the bridge's (and the relay's own) channel
/// events, in an idle session, across a restart of Claude Code and of the
/// relay, over HTTP, and through the plugin.
async fn through_channels(which: Build) {
    let claude = build(which);
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let model = FakeModel::start().await;
    let mut bob = ClaudeCode::new(&claude, &model, &app, &bob_token, Install::McpJson);
    bob.start();
    bob.confirm_development_channels();
    until_reachable(&app, "bob", &bob).await;

    // An idle session, nobody typing: the question reaches the model, and
    // its answer comes back in the same call (wait_for_reply_seconds).
    let alice = Mcp::connect(&app.url(), &alice_token).await.unwrap();
    let sent = ask(&alice, &model, "which port does staging use?").await;
    let (id, thread_id) = (id_of(&sent, "message_id"), id_of(&sent, "thread_id"));
    answered_in_thread(&sent["reply"], id, thread_id);
    let shown = model
        .channel_turn(id)
        .expect("the model was shown the question");
    assert!(
        shown.contains(&format!(
            "<channel source=\"crosstalk\" delivery_state=\"pushed\" from=\"alice\" \
             message_id=\"{id}\" thread_id=\"{thread_id}\" to=\"bob\" type=\"NOTE\">"
        )),
        "{shown}"
    );
    assert!(shown.contains("which port does staging use?"), "{shown}");
    assert!(
        shown.contains("answer with crosstalk's send_message tool"),
        "the first event says how to answer: {shown}"
    );
    let delivery = delivery_of(&app, id, &alice_token).await;
    assert_eq!(delivery["state"], "answered", "{delivery}");
    assert_eq!(delivery["via"], "channel", "{delivery}");

    // A second question.
    let sent = ask(&alice, &model, "and which database?").await;
    answered_in_thread(
        &sent["reply"],
        id_of(&sent, "message_id"),
        id_of(&sent, "thread_id"),
    );

    // One sent while Claude Code was not running waits, and comes at its
    // next start.
    bob.stop();
    let waited = send(&alice, "sent while you were away").await;
    bob.start();
    bob.confirm_development_channels();
    let answer = reply_in_inbox(&alice).await;
    if answer.is_null() {
        // It has failed here now and then (once in CI): say where the
        // message stood.
        let waited_id = id_of(&waited, "message_id");
        eprintln!(
            "no answer to the message sent while Claude Code was away; its delivery: {}\n{}",
            state_of(&app, waited_id, &alice_token).await,
            bob.logs()
        );
    }
    answered_in_thread(
        &answer,
        id_of(&waited, "message_id"),
        id_of(&waited, "thread_id"),
    );

    // A relay restart: the bridge reconnects.
    let app = app.restart().await;
    until_reachable(&app, "bob", &bob).await;
    let alice = Mcp::connect(&app.url(), &alice_token).await.unwrap();
    let sent = ask(&alice, &model, "after the restart?").await;
    answered_in_thread(
        &sent["reply"],
        id_of(&sent, "message_id"),
        id_of(&sent, "thread_id"),
    );
    bob.stop();

    // Straight over HTTP (`/mcp?push=1`), as `crosstalk add` prints it.
    let mut bob = ClaudeCode::new(&claude, &model, &app, &bob_token, Install::Http);
    bob.start();
    bob.confirm_development_channels();
    until_reachable(&app, "bob", &bob).await;
    let sent = ask(&alice, &model, "over http?").await;
    answered_in_thread(
        &sent["reply"],
        id_of(&sent, "message_id"),
        id_of(&sent, "thread_id"),
    );
    bob.stop();

    // Through the plugin, allowlisted: no screen to confirm at all.
    let mut bob = ClaudeCode::new(&claude, &model, &app, &bob_token, Install::Plugin);
    bob.start();
    until_reachable(&app, "bob", &bob).await;
    let sent = ask(&alice, &model, "through the plugin?").await;
    let id = id_of(&sent, "message_id");
    answered_in_thread(&sent["reply"], id, id_of(&sent, "thread_id"));
    let shown = model.channel_turn(id).unwrap();
    assert!(
        shown.contains("<channel source=\"plugin:crosstalk:crosstalk\""),
        "the channel, not the plugin's hooks: {shown}"
    );
    assert_eq!(delivery_of(&app, id, &alice_token).await["via"], "channel");
    bob.stop();
}

/// Claude Code's permission prompt, relayed: a teammate asks bob's agent
/// to run a command; Claude Code asks before it runs Bash (in its
/// terminal, and through the bridge to the relay); bob is told at once
/// (his webhook), sees the step in his approvals, and allows it, or denies
/// the next one; Claude Code runs it only when allowed, and its model
/// answers with what the command printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Claude Code (npm ci --prefix tests/clients); cargo test -- --ignored"]
async fn its_person_allows_the_real_claude_code_s_step_from_the_relay() {
    let claude = claude_code();
    let app = crate::attention::relay().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let mut told = crate::attention::Hook::start().await;
    let (status, _) = app
        .rest(&bob_token)
        .put(
            "/api/me/notifications",
            json!({ "webhook": format!("{}/bob", told.url) }),
        )
        .await;
    assert_eq!(status, 200);
    let model = FakeModel::start().await;
    let mut bob = ClaudeCode::new(&claude, &model, &app, &bob_token, Install::McpJson);
    // Claude Code's default mode is "auto": a classifier (here the fake
    // model, which blocks nothing) lets steps run unasked. A person who
    // wants to be asked chooses the mode that asks.
    bob.args
        .extend(["--permission-mode".to_owned(), "default".to_owned()]);
    bob.start();
    bob.confirm_development_channels();
    until_reachable(&app, "bob", &bob).await;
    let alice = Mcp::connect(&app.url(), &alice_token).await.unwrap();

    allowed_and_denied(&app, &alice, &bob_token, &mut told, &bob).await;
    bob.stop();
}

/// Sends alice's question to bob and waits for his answer in the same call;
/// prints how long until the model was shown it, and until the answer.
async fn ask(alice: &Mcp, model: &FakeModel, question: &str) -> Value {
    let asked = Instant::now();
    let sent = alice
        .call(
            "send_message",
            json!({ "to": "bob", "body": question, "wait_for_reply_seconds": 50 }),
        )
        .await
        .ok();
    let answered = asked.elapsed();
    if let Some(shown) = model.shown_at(id_of(&sent, "message_id")) {
        println!(
            "{question:?}: send -> shown to the model {:?}, send -> answer {answered:?}",
            shown.duration_since(asked)
        );
    }
    sent
}

async fn send(alice: &Mcp, question: &str) -> Value {
    alice
        .call("send_message", json!({ "to": "bob", "body": question }))
        .await
        .ok()
}

/// The next message in alice's inbox, waited for.
async fn reply_in_inbox(alice: &Mcp) -> Value {
    let inbox = alice
        .call("check_inbox", json!({ "timeout_seconds": 50 }))
        .await
        .ok();
    inbox["messages"][0].clone()
}

/// The fake model answers message `id` with "answer to ID", in its thread.
fn answered_in_thread(reply: &Value, id: i64, thread_id: i64) {
    assert_eq!(reply["from"], "bob", "{reply}");
    assert_eq!(reply["thread_id"], thread_id, "{reply}");
    assert_eq!(reply["body"], format!("answer to {id}"), "{reply}");
}

async fn state_of(app: &TestApp, id: i64, token: &str) -> Value {
    delivery_of(app, id, token).await["state"].clone()
}

async fn delivery_of(app: &TestApp, id: i64, token: &str) -> Value {
    let (_, read) = get(app, &format!("/api/messages/{id}"), token).await;
    read["message"]["delivery"].clone()
}

/// Waits until `handle`'s agent can be pushed to: its bridge proved that
/// Claude Code listens and opened its stream (which then parks, waking
/// this to look). After a relay restart the bridge may be in its backoff
/// (at most 30 s) when the relay comes back: the wait allows for it.
async fn until_reachable(app: &TestApp, handle: &str, claude: &ClaudeCode) {
    assert!(
        app.until_reachable(handle, PATIENCE * 2).await,
        "{handle} never became reachable by push; the screen:\n{}\nthe bridge and Claude Code:\n{}",
        claude.screen(),
        claude.logs()
    );
}

/// How Claude Code is given crosstalk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Install {
    /// The project's `.mcp.json`, as `crosstalk add` prints it, and
    /// `--dangerously-load-development-channels server:crosstalk`.
    McpJson,
    /// The same, with the relay's `/mcp?push=1` over HTTP instead of the
    /// bridge.
    Http,
    /// This repository's marketplace and plugin, and
    /// `--channels plugin:crosstalk@crosstalk`.
    Plugin,
    /// This repository's marketplace and plugin, started as people start
    /// it: no channel flag, `--permission-mode default`, and no remote
    /// feature flag seeded.
    PluginNoFlag,
    /// The project's `.mcp.json` as `crosstalk add` prints it, and no
    /// channel flag: a session that cannot be pushed to.
    McpJsonNoFlag,
    /// `crosstalk connect claude`, then Claude Code started as in
    /// `PluginNoFlag` with neither variable in its environment.
    Connect,
}

/// One person's Claude Code, in its own HOME and project, in tmux.
struct ClaudeCode {
    claude: PathBuf,
    home: tempfile::TempDir,
    project: PathBuf,
    /// Its terminal while it runs: a new one (a new tmux server) for each
    /// start.
    terminal: Option<Terminal>,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

/// The key the fake model accepts; approved in `~/.claude.json` by its
/// last 20 characters.
const API_KEY: &str = "sk-ant-api03-crosstalk-test-key-not-a-real-one-000000000000-AAAA";

impl ClaudeCode {
    fn new(
        claude: &Path,
        model: &FakeModel,
        app: &TestApp,
        token: &str,
        install: Install,
    ) -> ClaudeCode {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_crosstalk")).parent().unwrap();
        let env = vec![
            (
                "PATH".into(),
                format!("{}:/usr/bin:/bin", bin_dir.display()),
            ),
            ("HOME".into(), home.path().display().to_string()),
            ("TERM".into(), "xterm-256color".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("USER".into(), "root".into()),
            ("SHELL".into(), "/bin/bash".into()),
            // Claude Code refuses some things as root outside a sandbox.
            ("IS_SANDBOX".into(), "1".into()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            ("ANTHROPIC_BASE_URL".into(), model.url.clone()),
            ("ANTHROPIC_API_KEY".into(), API_KEY.into()),
            ("CROSSTALK_URL".into(), app.url()),
            ("CROSSTALK_TOKEN".into(), token.into()),
        ];
        let key20 = &API_KEY[API_KEY.len() - 20..];
        // Channels (`tengu_harbor`), and their permission relay
        // (`tengu_harbor_permissions`: without it Claude Code sends a
        // channel server no `permission_request`).
        let mut features = json!({ "tengu_harbor": true, "tengu_harbor_permissions": true });
        let (server, args) = match install {
            Install::PluginNoFlag | Install::Connect => {
                features = json!({});
                (
                    "plugin:crosstalk:crosstalk",
                    vec![
                        "--permission-mode".into(),
                        "default".into(),
                        "--allowedTools".into(),
                        "mcp__plugin_crosstalk_crosstalk__send_message Bash(sleep:*)".into(),
                    ],
                )
            }
            Install::McpJsonNoFlag => {
                features = json!({});
                (
                    "crosstalk",
                    vec!["--permission-mode".into(), "default".into()],
                )
            }
            Install::McpJson | Install::Http => (
                "crosstalk",
                vec![
                    "--allowedTools".into(),
                    "mcp__crosstalk__send_message".into(),
                    "--dangerously-load-development-channels".into(),
                    "server:crosstalk".into(),
                ],
            ),
            Install::Plugin => {
                features["tengu_harbor_ledger"] =
                    json!([{ "marketplace": "crosstalk", "plugin": "crosstalk" }]);
                (
                    "plugin:crosstalk:crosstalk",
                    vec![
                        "--allowedTools".into(),
                        "mcp__plugin_crosstalk_crosstalk__send_message".into(),
                        "--channels".into(),
                        "plugin:crosstalk@crosstalk".into(),
                    ],
                )
            }
        };
        let settings = json!({
            "hasCompletedOnboarding": true,
            "lastOnboardingVersion": "2.1.332",
            "theme": "dark",
            "customApiKeyResponses": { "approved": [key20], "rejected": [] },
            "cachedGrowthBookFeatures": features,
            "projects": { project.display().to_string(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true,
                "enabledMcpjsonServers": [server],
            } },
        });
        write_json(&home.path().join(".claude.json"), &settings);
        write_json(
            &home.path().join(".claude/settings.json"),
            &json!({ "enableAllProjectMcpServers": true, "enabledMcpjsonServers": [server] }),
        );
        let mut code = ClaudeCode {
            claude: claude.to_owned(),
            terminal: None,
            home,
            project,
            env,
            args,
        };
        match install {
            Install::McpJson | Install::McpJsonNoFlag => code.write_mcp_json(),
            Install::Http => code.write_mcp_json_http(),
            Install::Plugin | Install::PluginNoFlag => code.install_plugin(),
            Install::Connect => {
                code.connect();
                code.env
                    .retain(|(name, _)| name != "CROSSTALK_URL" && name != "CROSSTALK_TOKEN");
            }
        }
        code
    }

    /// The entry `crosstalk add` prints, in the project's `.mcp.json`.
    fn write_mcp_json(&self) {
        let entry = json!({ "mcpServers": { "crosstalk": {
            "command": "crosstalk",
            "args": ["bridge"],
            "env": {
                "CROSSTALK_URL": self.var("CROSSTALK_URL"),
                "CROSSTALK_TOKEN": "${CROSSTALK_TOKEN}",
            },
        } } });
        write_json(&self.project.join(".mcp.json"), &entry);
    }

    /// The HTTP entry `crosstalk add` prints (`claude mcp add --transport
    /// http … --header …`), as `.mcp.json` holds it.
    fn write_mcp_json_http(&self) {
        let entry = json!({ "mcpServers": { "crosstalk": {
            "type": "http",
            "url": format!("{}/mcp?push=1", self.var("CROSSTALK_URL")),
            "headers": { "Authorization": "Bearer ${CROSSTALK_TOKEN}" },
        } } });
        write_json(&self.project.join(".mcp.json"), &entry);
    }

    /// `claude plugin marketplace add` this repository, then `claude
    /// plugin install crosstalk@crosstalk`.
    fn install_plugin(&self) {
        let repository = env!("CARGO_MANIFEST_DIR");
        for args in [
            vec!["plugin", "marketplace", "add", repository],
            vec!["plugin", "install", "crosstalk@crosstalk"],
        ] {
            let done = Command::new(&self.claude)
                .args(&args)
                .env_clear()
                .envs(self.env.iter().cloned())
                .current_dir(&self.project)
                .output()
                .unwrap();
            assert!(
                done.status.success(),
                "claude {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&done.stdout),
                String::from_utf8_lossy(&done.stderr)
            );
        }
    }

    /// `crosstalk connect claude`, as the person runs it.
    fn connect(&self) {
        let done = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .args(["connect", "claude", "--program"])
            .arg(&self.claude)
            .env_clear()
            .envs(self.env.iter().cloned())
            .current_dir(&self.project)
            .output()
            .unwrap();
        assert!(done.status.success(), "crosstalk connect claude: {done:?}");
    }

    fn var(&self, name: &str) -> String {
        self.env.iter().find(|(n, _)| n == name).unwrap().1.clone()
    }

    /// Starts Claude Code in a terminal of its own, as a person would (its
    /// debug log beside the HOME).
    fn start(&mut self) {
        let debug_log = self.home.path().join("debug.log").display().to_string();
        let mut args = vec!["--debug-file", debug_log.as_str()];
        args.extend(self.args.iter().map(String::as_str));
        self.terminal = Some(Terminal::start(
            &self.project,
            &self.env,
            &self.claude,
            &args,
        ));
    }

    fn terminal(&self) -> &Terminal {
        self.terminal.as_ref().expect("Claude Code was started")
    }

    /// The screen as a person sees it now.
    fn screen(&self) -> String {
        self.terminal().screen()
    }

    /// Waits until the screen shows `text`.
    fn until_screen(&self, text: &str) {
        self.terminal()
            .until_screen_explained(text, || self.debug_log());
    }

    /// Types `text` at the prompt and sends it, as the person would.
    fn type_prompt(&self, text: &str) {
        self.terminal().type_prompt(text);
    }

    /// Waits until Claude Code's logs (its debug log, its MCP servers')
    /// say `text` (read every 100 ms, as the screen is).
    fn until_log(&self, text: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.logs_whole().contains(text) {
            assert!(
                Instant::now() < deadline,
                "the logs never said {text:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every log, whole.
    fn logs_whole(&self) -> String {
        let mut logs = self.debug_log();
        let mut stack = vec![self.home.path().join(".cache/claude-cli-nodejs")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    logs.push_str(&text);
                }
            }
        }
        logs
    }

    /// The development channels warning: its default, "I am using this for
    /// local development", with Enter (pressed again while the screen
    /// stays: one pressed as it paints can be lost).
    fn confirm_development_channels(&self) {
        self.terminal()
            .answer("I am using this for local development", &["Enter"]);
    }

    fn debug_log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("debug.log")).unwrap_or_default()
    }

    /// The end of Claude Code's debug log and of its MCP servers' logs (the
    /// bridge's stderr is there), for a failure's message.
    fn logs(&self) -> String {
        let mut logs = tail(&self.debug_log(), 40);
        let cache = self.home.path().join(".cache/claude-cli-nodejs");
        let mut stack = vec![cache];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    logs.push_str(&format!("\n== {}\n{}", path.display(), tail(&text, 30)));
                }
            }
        }
        logs
    }

    /// Ends Claude Code (its bridge ends with it).
    fn stop(&mut self) {
        self.terminal = None;
    }
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// What the model was sent, and when.
type Requests = Arc<Mutex<Vec<(Instant, Value)>>>;

/// A fake Anthropic Messages API: what the model is sent, and a model that
/// answers channel events.
struct FakeModel {
    url: String,
    /// Every request to `/v1/messages`, as sent, and when it came.
    requests: Requests,
    /// Told of each request.
    arrived: Arc<tokio::sync::Notify>,
}

impl FakeModel {
    async fn start() -> FakeModel {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(tokio::sync::Notify::new());
        let told = arrived.clone();
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route(
                "/v1/messages/count_tokens",
                post(|| async { Json(json!({ "input_tokens": 1000 })) }),
            )
            .with_state(requests.clone())
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let told = told.clone();
                    async move {
                        let response = next.run(request).await;
                        told.notify_waiters();
                        response
                    }
                },
            ));
        FakeModel {
            url: crate::support::serve(app).await,
            requests,
            arrived,
        }
    }

    /// Waits until the model was asked to answer a user turn that says
    /// `text`: the turn is under way.
    async fn until_running(&self, text: &str) {
        let asked = || {
            self.requests
                .lock()
                .unwrap()
                .iter()
                .any(|(_, request)| latest_user_text(request).is_some_and(|t| t.contains(text)))
        };
        tokio::time::timeout(PATIENCE, async {
            loop {
                let next = self.arrived.notified();
                if asked() {
                    return;
                }
                next.await;
            }
        })
        .await
        .expect("the model was asked to run it");
    }

    /// What the model was given back for its first call of `tool`: the
    /// `tool_result` block, once a request carries it.
    async fn until_result_of(&self, tool: &str) -> Value {
        let result = || {
            self.requests
                .lock()
                .unwrap()
                .iter()
                .find_map(|(_, request)| {
                    let blocks: Vec<&Value> = request["messages"]
                        .as_array()?
                        .iter()
                        .filter_map(|m| m["content"].as_array())
                        .flatten()
                        .collect();
                    let called = blocks
                        .iter()
                        .find(|b| b["type"] == "tool_use" && b["name"] == tool)?;
                    blocks
                        .iter()
                        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == called["id"])
                        .map(|b| (*b).clone())
                })
        };
        tokio::time::timeout(PATIENCE, async {
            loop {
                let next = self.arrived.notified();
                if let Some(found) = result() {
                    return found;
                }
                next.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the model was never given {tool}'s result"))
    }

    /// The text of the first turn the model was shown that carries message
    /// `id` as a channel event.
    fn channel_turn(&self, id: i64) -> Option<String> {
        let marker = format!("message_id=\"{id}\"");
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, request)| latest_user_text(request))
            .find(|text| text.contains("<channel source=") && text.contains(&marker))
    }

    /// When the model was first shown message `id`: in a user turn, or
    /// in a system turn that came in while it worked.
    fn shown_at(&self, id: i64) -> Option<Instant> {
        self.first_showing(id).map(|(at, _)| at)
    }

    /// The messages of the first request that showed the model message `id`.
    fn turn_showing(&self, id: i64) -> Option<Vec<Value>> {
        self.first_showing(id).map(|(_, messages)| messages)
    }

    fn first_showing(&self, id: i64) -> Option<(Instant, Vec<Value>)> {
        let marker = format!("message_id=\"{id}\"");
        self.requests
            .lock()
            .unwrap()
            .iter()
            .find(|(_, request)| {
                request["messages"].as_array().is_some_and(|messages| {
                    messages
                        .iter()
                        .rev()
                        .find(|m| not_the_model(m))
                        .is_some_and(|m| text_of(m).contains(&marker))
                })
            })
            .map(|(at, request)| {
                let messages = request["messages"].as_array().cloned().unwrap_or_default();
                (*at, messages)
            })
    }
}

async fn messages(
    State(requests): State<Requests>,
    Json(request): Json<Value>,
) -> impl IntoResponse {
    requests
        .lock()
        .unwrap()
        .push((Instant::now(), request.clone()));
    let answer = decide(&request);
    let stream = request["stream"].as_bool().unwrap_or(false);
    let message = assistant_message(&request, answer);
    if !stream {
        return Json(message).into_response();
    }
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        events(&message),
    )
        .into_response()
}

/// What the fake model says.
enum Answer {
    Text(String),
    Tool(String, Value),
}

/// A model that answers the newest channel event in its turn: it loads
/// crosstalk's `send_message` with the tool search when the tool is
/// deferred, then answers in the event's thread; and says little else.
fn decide(request: &Value) -> Answer {
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    if tools.is_empty() {
        // A side request: a title, a summary, a permission classifier.
        return Answer::Text("<block>no".into());
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let Some(latest) = messages.iter().rev().find(|m| not_the_model(m)) else {
        return Answer::Text("OK.".into());
    };
    let ran = ran_since_the_event(&messages);
    // The result of one of its own tool calls.
    if let Some(result) = latest["content"]
        .as_array()
        .and_then(|blocks| blocks.iter().find(|b| b["type"] == "tool_result"))
    {
        let called = messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .find(|b| b["type"] == "tool_use" && b["id"] == result["tool_use_id"]);
        let name = called.and_then(|c| c["name"].as_str()).unwrap_or_default();
        // Asked to edit a file: read it, then edit it.
        if name == "Read"
            && let Some(path) = called.and_then(|c| c["input"]["file_path"].as_str())
        {
            return Answer::Tool(
                "Edit".into(),
                json!({ "file_path": path, "old_string": "original", "new_string": "changed" }),
            );
        }
        if name == "ToolSearch" || name == "Bash" {
            let event = messages
                .iter()
                .rev()
                .filter(|m| not_the_model(m))
                .filter_map(|m| latest_text(m).and_then(|t| newest_channel(&t)))
                .next();
            if let Some((source, attributes)) = event {
                return answer_event(&source, &attributes, &tools, ran.as_deref());
            }
        }
        return Answer::Text("Sent.".into());
    }
    let text = latest_text(latest).unwrap_or_default();
    let asked_to_edit = regex::Regex::new(r"Please edit: ([^\s<]+)").unwrap();
    if let Some(path) = asked_to_edit.captures(&text) {
        return Answer::Tool("Read".into(), json!({ "file_path": path[1].trim() }));
    }
    let asked_to_run = regex::Regex::new(r"Please run: ([^\n<]+)").unwrap();
    if let Some(command) = asked_to_run.captures(&text) {
        return Answer::Tool(
            "Bash".into(),
            json!({ "command": command[1].trim(), "description": "Run what the teammate asked" }),
        );
    }
    match newest_channel(&text) {
        Some((source, attributes)) => answer_event(&source, &attributes, &tools, None),
        None => Answer::Text("OK.".into()),
    }
}

/// A turn the model answers: the user's, or a channel event that arrived
/// while the model worked (Claude Code adds it as a `system` turn).
fn not_the_model(message: &Value) -> bool {
    message["role"] == "user"
        || (message["role"] == "system"
            && latest_text(message).is_some_and(|t| t.contains("<channel ")))
}

/// What the Bash tool gave back (its output, or why it did not run) since
/// the newest channel event, if the model ran it.
fn ran_since_the_event(messages: &[Value]) -> Option<String> {
    let event = messages.iter().rposition(|m| {
        not_the_model(m) && latest_text(m).is_some_and(|t| t.contains("<channel "))
    })?;
    let blocks: Vec<&Value> = messages[event..]
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .collect();
    let bash = blocks
        .iter()
        .find(|b| b["type"] == "tool_use" && b["name"] == "Bash")?;
    let result = blocks
        .iter()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == bash["id"])?;
    Some(match &result["content"] {
        Value::String(text) => text.clone(),
        content => latest_text(&json!({ "content": content })).unwrap_or_default(),
    })
}

/// `send_message` in the event's thread (with what a command it ran gave
/// back), or the tool search for it.
fn answer_event(
    source: &str,
    attributes: &[(String, String)],
    tools: &[&str],
    ran: Option<&str>,
) -> Answer {
    let get = |name: &str| {
        attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let server: String = source
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // The channel's source names the server; a hook's block says
    // "crosstalk" whatever the plugin's server is called, and the model
    // finds the tool by searching, as the block's last line says.
    let tool = format!("mcp__{server}__send_message");
    let tool = match tools
        .iter()
        .find(|t| t.contains("crosstalk") && t.ends_with("__send_message"))
    {
        Some(found) => found.to_string(),
        None if source == "crosstalk" => {
            return Answer::Tool(
                "ToolSearch".into(),
                json!({ "query": "crosstalk send_message", "max_results": 5 }),
            );
        }
        None => {
            return Answer::Tool(
                "ToolSearch".into(),
                json!({ "query": format!("select:{tool}"), "max_results": 5 }),
            );
        }
    };
    let thread_id: i64 = get("thread_id").parse().unwrap_or_default();
    Answer::Tool(
        tool,
        json!({
            "to": get("from"),
            "thread_id": thread_id,
            "body": match ran {
                Some(output) => format!("answer to {}: {output}", get("message_id")),
                None => format!("answer to {}", get("message_id")),
            },
        }),
    )
}

/// The text of a user turn: its text blocks and tool results.
fn latest_text(message: &Value) -> Option<String> {
    match &message["content"] {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// A turn's text, blocks and all.
fn text_of(message: &Value) -> String {
    latest_text(message).unwrap_or_default()
}

fn latest_user_text(request: &Value) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(latest_text)
}

/// The source and attributes of the last `<channel …>` tag in `text`.
fn newest_channel(text: &str) -> Option<(String, Vec<(String, String)>)> {
    let tag = regex::Regex::new(r#"<channel ([^>]*)>"#).unwrap();
    let attribute = regex::Regex::new(r#"(\w+)="([^"]*)""#).unwrap();
    let last = tag.captures_iter(text).last()?;
    let attributes: Vec<(String, String)> = attribute
        .captures_iter(&last[1])
        .map(|a| (a[1].to_owned(), a[2].to_owned()))
        .collect();
    let source = attributes.iter().find(|(n, _)| n == "source")?.1.clone();
    Some((source, attributes))
}

fn assistant_message(request: &Value, answer: Answer) -> Value {
    let (content, stop) = match answer {
        Answer::Text(text) => (json!([{ "type": "text", "text": text }]), "end_turn"),
        Answer::Tool(name, input) => (
            json!([{ "type": "tool_use", "id": format!("toolu_{}", unique()), "name": name, "input": input }]),
            "tool_use",
        ),
    };
    json!({
        "id": format!("msg_{}", unique()),
        "type": "message",
        "role": "assistant",
        "model": request["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": { "input_tokens": 10, "output_tokens": 5,
                   "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0 },
    })
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{:024}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The message as the Messages API streams it.
fn events(message: &Value) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    event(
        "message_start",
        json!({ "type": "message_start", "message": start }),
    );
    for (index, block) in message["content"].as_array().unwrap().iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => {
                event(
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index, "content_block": { "type": "text", "text": "" } }),
                );
                event(
                    "content_block_delta",
                    json!({ "type": "content_block_delta", "index": index, "delta": { "type": "text_delta", "text": block["text"] } }),
                );
            }
            _ => {
                event(
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index, "content_block": { "type": "tool_use", "id": block["id"], "name": block["name"], "input": {} } }),
                );
                event(
                    "content_block_delta",
                    json!({ "type": "content_block_delta", "index": index, "delta": { "type": "input_json_delta", "partial_json": block["input"].to_string() } }),
                );
            }
        }
        event(
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": index }),
        );
    }
    event(
        "message_delta",
        json!({ "type": "message_delta", "delta": { "stop_reason": message["stop_reason"], "stop_sequence": null }, "usage": { "output_tokens": 5 } }),
    );
    event("message_stop", json!({ "type": "message_stop" }));
    out
}
