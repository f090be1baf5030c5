//! The other agents a team runs beside Claude Code, each the real CLI
//! pinned in `tests/clients/agents/package.json`, set up with `crosstalk
//! connect` in a fresh HOME as a person would, and run against a fake model
//! API on loopback in its vendor's wire format that records what the model
//! is sent and answers a `<channel>` block the way a model would: with
//! crosstalk's `send_message` in the block's thread.
//!
//! Needs `tmux` and `npm install --prefix tests/clients/agents` (`.ci/run` does
//! both), so each is `#[ignore]`d: a plain `cargo test` reports it as
//! ignored.
//!
//! Rerun: `npm install --prefix tests/clients/agents && cargo test --test relay
//! agents -- --ignored --nocapture` (the figures are printed).

use crate::support::{Mcp, id_of, nobody, spawn_app};
use crate::terminal::{PATIENCE, Terminal};
use axum::{Router, extract::State, response::IntoResponse, routing::post};
use serde_json::{Value, json};
use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::Instant,
};

/// A pinned CLI of `tests/clients/agents` (the tests are `#[ignore]`d,
/// saying what they need: where it is missing, they fail).
fn cli(name: &str) -> PathBuf {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/agents/node_modules/.bin")
        .join(name);
    let tmux = Command::new("tmux").arg("-V").output().is_ok();
    assert!(
        installed.exists() && tmux,
        "{name} (npm install --prefix tests/clients/agents) or tmux is not installed (.ci/run \
         installs them)"
    );
    installed
}

/// One person's machine: a HOME of their own with a project folder in it,
/// and the environment their shell gives the agent.
struct Person {
    home: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Person {
    fn new() -> Person {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("project")).unwrap();
        let env = vec![
            ("HOME".to_owned(), home.path().display().to_string()),
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("TERM".to_owned(), "xterm-256color".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ];
        Person { home, env }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.home.path().join(relative)
    }

    fn project(&self) -> PathBuf {
        self.path("project")
    }

    /// `crosstalk connect CLIENT` as the person runs it, their token in the
    /// environment; its output.
    fn connect(&self, client: &str, url: &str, token: &str, extra: &[&str]) -> String {
        let done = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .args(["connect", client, "--url", url])
            .args(extra)
            .env_clear()
            .envs(self.env.iter().cloned())
            .env("CROSSTALK_TOKEN", token)
            .current_dir(self.project())
            .output()
            .unwrap();
        assert!(done.status.success(), "{done:?}");
        String::from_utf8_lossy(&done.stdout).into_owned()
    }

    /// The variables `connect` wrote to the private file the person's shell
    /// profile loads, as that shell would export them.
    fn profile(&self) -> Vec<(String, String)> {
        let path = self.path(".config/crosstalk/env");
        let text = std::fs::read_to_string(&path).unwrap();
        text.lines()
            .filter_map(|line| line.strip_prefix("export "))
            .filter_map(|line| line.split_once('='))
            .map(|(name, value)| (name.to_owned(), value.trim_matches('\'').to_owned()))
            .collect()
    }

    /// The person's environment with `more` added: what their shell gives
    /// an agent.
    fn with(&self, more: &[(String, String)]) -> Vec<(String, String)> {
        self.env.iter().chain(more).cloned().collect()
    }

    /// Runs `program` in the project with the person's environment and
    /// `more`; its output, which must be a success.
    fn run(&self, program: &Path, args: &[&str], more: &[(String, String)]) -> String {
        let done = Command::new(program)
            .args(args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .envs(more.iter().cloned())
            .current_dir(self.project())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&done.stdout),
            String::from_utf8_lossy(&done.stderr)
        );
        assert!(done.status.success(), "{program:?} {args:?}: {out}");
        out
    }
}

/// What the person's agents left running ends with their machine: Codex
/// starts an app server of its own that outlives its terminal, and with it
/// the hook's waiter, which waits for as long as that server runs.
impl Drop for Person {
    fn drop(&mut self) {
        let home = self.home.path().display().to_string();
        let Ok(processes) = std::fs::read_dir("/proc") else {
            return;
        };
        for process in processes.flatten() {
            let Ok(pid) = process.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(process.path().join("cmdline")).unwrap_or_default();
            let environ = std::fs::read(process.path().join("environ")).unwrap_or_default();
            let home_var = format!("HOME={home}");
            let mine = String::from_utf8_lossy(&cmdline).contains(&home)
                || environ
                    .split(|&b| b == 0)
                    .any(|var| var == home_var.as_bytes());
            if mine && pid != std::process::id() as i32 {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
}

/// Checks what `connect` leaves: run again it changes nothing, `--print`
/// changes nothing and masks the token, the token is in no file but the
/// private env file (0600), and nothing is written in the project.
fn connected_once(person: &Person, connect: &[&str], url: &str, token: &str, files: &[&str]) {
    let (client, extra) = connect.split_first().unwrap();
    use std::os::unix::fs::PermissionsExt;
    let read = || -> Vec<String> {
        files
            .iter()
            .map(|f| std::fs::read_to_string(person.path(f)).unwrap())
            .collect()
    };
    let once = read();
    person.connect(client, url, token, extra);
    assert_eq!(read(), once, "a second connect changed nothing");
    let printed = person.connect(client, url, token, &[extra, &["--print"]].concat());
    assert_eq!(read(), once, "--print changed nothing");
    assert!(!printed.contains(token), "{printed}");
    for (file, text) in files.iter().zip(&once) {
        assert!(!text.contains(token), "the token is not in {file}: {text}");
    }
    let env = person.path(".config/crosstalk/env");
    let mode = std::fs::metadata(&env).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(std::fs::read_to_string(&env).unwrap().contains(token));
    let project: Vec<_> = std::fs::read_dir(person.project()).unwrap().collect();
    assert!(
        project.is_empty(),
        "connect wrote in the project: {project:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Codex (npm install --prefix tests/clients/agents); cargo test -- --ignored"]
async fn codex_set_up_by_connect_is_woken_by_a_question_and_answers_in_the_thread() {
    let codex = cli("codex");
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let model = FakeModel::start().await;
    let bob = Person::new();
    // The person's own settings: their model, a server of theirs, a comment.
    let theirs = format!(
        "# bob's settings\nmodel = \"gpt-test\"\nmodel_provider = \"fake\"\n\n\
         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
         env_key = \"FAKE_KEY\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n",
        model.url
    );
    std::fs::create_dir_all(bob.path(".codex")).unwrap();
    std::fs::write(bob.path(".codex/config.toml"), &theirs).unwrap();
    let codex_arg = codex.display().to_string();
    bob.connect("codex", &app.url(), &bob_token, &["--program", &codex_arg]);
    let config = std::fs::read_to_string(bob.path(".codex/config.toml")).unwrap();
    assert!(
        config.starts_with(&theirs),
        "theirs kept as it was: {config}"
    );
    connected_once(
        &bob,
        &["codex", "--program", &codex_arg],
        &app.url(),
        &bob_token,
        &[".codex/config.toml", ".codex/hooks.json"],
    );
    let mut shell = bob.profile();
    shell.push(("FAKE_KEY".into(), "fake".into()));
    let listed = bob.run(&codex, &["mcp", "list"], &shell);
    let row = listed
        .lines()
        .find(|l| l.starts_with("crosstalk "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains(&format!("{}/mcp", app.url())), "{row}");
    assert!(
        row.contains("CROSSTALK_TOKEN") && row.contains("enabled"),
        "{row}"
    );
    assert!(listed.lines().any(|l| l.starts_with("docs ")), "{listed}");

    // Codex as the person starts it: it may ask to trust the folder, and
    // it asks to trust the hooks `connect` wrote (the person's step, which
    // connect says).
    let env = bob.with(&shell);
    let terminal = Terminal::start(&bob.project(), &env, &codex, &[]);
    const FOLDER: &str = "Trust this folder?";
    if terminal.until_one_of(&[FOLDER, "Hooks need review"]) == 0 {
        terminal.answer(FOLDER, &["Enter"]);
    }
    terminal.answer("Hooks need review", &["Down", "Enter"]);
    terminal.until_screen("Ask Codex to do anything");
    // A session is Codex's once its first turn starts; from then on the
    // hook's waiter holds it.
    // Its turn is over once its Stop hooks have run, and Codex then says
    // how long it worked. (A question that comes before that is the Stop
    // hook's: Codex hands a hook's text to the model inside a
    // `<hook_prompt>` tag, escaped.)
    let idle = Some("Worked for");
    woken_while_idle("Codex", &app, &alice_token, &model, &terminal, idle).await;
    drop(terminal);

    // The relay away never holds Codex up: a turn with every crosstalk
    // hook pointed at a closed port ends with the model's answer.
    let away = relay_away(&shell);
    let out = bob.run(&codex, &["exec", "--skip-git-repo-check", "say OK"], &away);
    assert!(out.contains("OK."), "{out}");
    for hook in ["SessionStart", "UserPromptSubmit", "Stop"] {
        assert!(out.contains(&format!("hook: {hook} Completed")), "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Gemini CLI (npm install --prefix tests/clients/agents); cargo test -- --ignored"]
async fn gemini_set_up_by_connect_lists_the_relay_connected() {
    let gemini = cli("gemini");
    let app = spawn_app().await;
    let bob_token = app.add_person("bob").await;
    let model = FakeModel::start().await;
    let bob = Person::new();
    // The person's own settings: their sign-in and a server of theirs
    // (remote and refusing, so that Gemini CLI is ready without it).
    let theirs = json!({
        "security": { "auth": { "selectedType": "gemini-api-key" } },
        "mcpServers": { "docs": { "httpUrl": format!("{}/docs", nobody()) } },
    });
    std::fs::create_dir_all(bob.path(".gemini")).unwrap();
    std::fs::write(bob.path(".gemini/settings.json"), theirs.to_string()).unwrap();
    let said = bob.connect("gemini", &app.url(), &bob_token, &[]);
    assert!(said.contains("only in a folder you trust"), "{said}");
    connected_once(
        &bob,
        &["gemini"],
        &app.url(),
        &bob_token,
        &[".gemini/settings.json"],
    );
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(bob.path(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["security"], theirs["security"]);
    assert_eq!(settings["mcpServers"]["docs"], theirs["mcpServers"]["docs"]);
    let shell = gemini_shell(&bob, &model);
    let listed = bob.run(&gemini, &["mcp", "list"], &shell);
    assert!(
        listed.contains(&format!(
            "✓ crosstalk: {}/mcp (http) - Connected",
            app.url()
        )),
        "{listed}"
    );
    assert!(listed.contains("docs"), "{listed}");

    // The relay away never holds Gemini CLI up.
    let away = relay_away(&shell);
    let out = bob.run(&gemini, &["-p", "say OK"], &away);
    assert!(out.contains("OK."), "{out}");
}

/// Gemini CLI has no way in for an idle session: alice's question waits
/// (and says so) until a turn of bob's ends, and goes on in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and Gemini CLI (npm install --prefix tests/clients/agents); cargo test -- --ignored"]
async fn gemini_answers_a_waiting_question_when_a_turn_ends() {
    let gemini = cli("gemini");
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let model = FakeModel::start().await;
    let bob = Person::new();
    let theirs = json!({ "security": { "auth": { "selectedType": "gemini-api-key" } } });
    std::fs::create_dir_all(bob.path(".gemini")).unwrap();
    std::fs::write(bob.path(".gemini/settings.json"), theirs.to_string()).unwrap();
    bob.connect("gemini", &app.url(), &bob_token, &[]);
    let shell = gemini_shell(&bob, &model);
    let alice = Mcp::connect(&app.url(), &alice_token).await.unwrap();
    let asked = Instant::now();
    let sent = alice
        .call(
            "send_message",
            json!({ "to": "bob", "body": "which port does staging use?" }),
        )
        .await
        .ok();
    let (id, thread_id) = (id_of(&sent, "message_id"), id_of(&sent, "thread_id"));
    assert_eq!(
        app.rest(&alice_token).delivery(id).await["state"],
        "waiting"
    );
    let env = bob.with(&shell);
    let terminal = Terminal::start(&bob.project(), &env, &gemini, &[]);
    terminal.until_screen("Type your message");
    // Alice waits for the answer while bob's turn runs.
    let answer = tokio::spawn(async move {
        let inbox = alice
            .call("check_inbox", json!({ "timeout_seconds": 50 }))
            .await
            .ok();
        (inbox, Instant::now())
    });
    let turn = Instant::now();
    terminal.type_prompt("hello");
    let (inbox, at) = answer.await.unwrap();
    let answered = at.duration_since(turn);
    let reply = &inbox["messages"][0];
    assert_eq!(
        reply["from"],
        "bob",
        "{inbox}\n{}\nwhat the model was sent: {:#?}",
        terminal.screen(),
        model.sent()
    );
    assert_eq!(reply["thread_id"], thread_id, "{reply}");
    assert_eq!(reply["body"], format!("answer to {id}"), "{reply}");
    let (shown_at, shown) = model.shown(id);
    // The block a channel event gives (`offer` where it was offered before).
    let block = regex::Regex::new(&format!(
        "^<channel source=\"crosstalk\" delivery_state=\"pushed\" from=\"alice\" \
         message_id=\"{id}\" (offer=\"[0-9]+\" )?thread_id=\"{thread_id}\" to=\"bob\" \
         type=\"NOTE\">\nwhich port does staging use\\?\n"
    ))
    .unwrap();
    assert!(block.is_match(&shown), "{shown}");
    let delivery = app.rest(&alice_token).delivery(id).await;
    assert_eq!(delivery["state"], "answered", "{delivery}");
    assert_eq!(delivery["via"], "hook", "{delivery}");
    println!(
        "Gemini CLI, at the end of a turn: sent {:?} before the turn; turn -> shown to the \
         model {:?}, turn -> answer {answered:?}",
        turn.duration_since(asked),
        shown_at.duration_since(turn)
    );
    drop(terminal);
}

/// Bob starts a turn (his client's session exists only then) and, once
/// his agent is reachable and idle (when `idle` is given, once the screen
/// shows it: where the client says its turn is over), nobody typing,
/// alice asks and waits: the model is shown the question as a `<channel>`
/// block, answers with `send_message` in its thread, and the ledger says
/// `wake`. Prints the figures.
async fn woken_while_idle(
    client: &str,
    app: &crate::support::TestApp,
    alice_token: &str,
    model: &FakeModel,
    terminal: &Terminal,
    idle: Option<&str>,
) {
    terminal.type_prompt("hello");
    model.until_asked("hello").await;
    if let Some(idle) = idle {
        terminal.until_screen(idle);
    }
    assert!(
        app.until_reachable("bob", PATIENCE).await,
        "bob never became reachable; the screen:\n{}",
        terminal.screen()
    );
    let alice = Mcp::connect(&app.url(), alice_token).await.unwrap();
    let asked = Instant::now();
    let sent = alice
        .call(
            "send_message",
            json!({ "to": "bob", "body": "which port does staging use?", "wait_for_reply_seconds": 50 }),
        )
        .await
        .ok();
    let answered = asked.elapsed();
    let (id, thread_id) = (id_of(&sent, "message_id"), id_of(&sent, "thread_id"));
    let reply = &sent["reply"];
    assert_eq!(
        reply["from"],
        "bob",
        "{sent}\n{}\nwhat the model was sent: {:#?}",
        terminal.screen(),
        model.sent()
    );
    assert_eq!(reply["thread_id"], thread_id, "{reply}");
    assert_eq!(reply["body"], format!("answer to {id}"), "{reply}");
    let (shown_at, shown) = model.shown(id);
    assert!(
        shown.starts_with(&format!(
            "<channel source=\"crosstalk\" delivery_state=\"pushed\" from=\"alice\" \
             message_id=\"{id}\" thread_id=\"{thread_id}\" to=\"bob\" type=\"NOTE\">\n\
             which port does staging use?\n"
        )),
        "{shown}"
    );
    assert!(
        shown.contains("answer with crosstalk's send_message tool"),
        "{shown}"
    );
    let delivery = app.rest(alice_token).delivery(id).await;
    assert_eq!(delivery["state"], "answered", "{delivery}");
    assert_eq!(delivery["via"], "wake", "{delivery}");
    println!(
        "{client}, idle: send -> shown to the model {:?}, send -> answer {answered:?}",
        shown_at.duration_since(asked)
    );
}

/// What Gemini CLI runs with once `connect` has run: the folder trusted
/// (the step connect leaves to the person), and the shell's variables with
/// the fake model's key and address.
fn gemini_shell(person: &Person, model: &FakeModel) -> Vec<(String, String)> {
    std::fs::write(
        person.path(".gemini/trustedFolders.json"),
        json!({ person.project().display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    let mut shell = person.profile();
    shell.push(("GEMINI_API_KEY".into(), "fake".into()));
    shell.push(("GOOGLE_GEMINI_BASE_URL".into(), model.url.clone()));
    shell
}

/// `shell` with the relay's address one where nothing listens.
fn relay_away(shell: &[(String, String)]) -> Vec<(String, String)> {
    let mut away: Vec<_> = shell
        .iter()
        .filter(|(name, _)| name != "CROSSTALK_URL")
        .cloned()
        .collect();
    away.push(("CROSSTALK_URL".into(), nobody()));
    away
}

/// OpenCode: `connect` writes the relay into its settings and the crosstalk
/// plugin beside them, which prompts the person's session with a message
/// as it comes: an idle session answers with nobody typing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs tmux and OpenCode (npm install --prefix tests/clients/agents); cargo test -- --ignored"]
async fn opencode_set_up_by_connect_is_woken_by_a_question_and_answers_in_the_thread() {
    let opencode = cli("opencode");
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let bob_token = app.add_person("bob").await;
    let model = FakeModel::start().await;
    let bob = Person::new();
    // The person's own settings: their model (OpenAI's provider at the
    // fake's address) and a server of theirs.
    let theirs = json!({
        "$schema": "https://opencode.ai/config.json",
        "model": "openai/gpt-test",
        "small_model": "openai/gpt-test",
        "provider": { "openai": {
            "options": { "baseURL": format!("{}/v1", model.url), "apiKey": "fake" },
            "models": { "gpt-test": { "name": "gpt-test" } },
        } },
        "mcp": { "docs": { "type": "local", "command": ["docs-mcp"], "enabled": false } },
    });
    std::fs::create_dir_all(bob.path(".config/opencode")).unwrap();
    let config = ".config/opencode/opencode.json";
    std::fs::write(bob.path(config), theirs.to_string()).unwrap();
    let said = bob.connect("opencode", &app.url(), &bob_token, &[]);
    assert!(said.contains("next prompt"), "{said}");
    let plugin = ".config/opencode/plugin/crosstalk.js";
    connected_once(
        &bob,
        &["opencode"],
        &app.url(),
        &bob_token,
        &[config, plugin],
    );
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(bob.path(config)).unwrap()).unwrap();
    for key in ["$schema", "model", "provider"] {
        assert_eq!(settings[key], theirs[key], "{key}");
    }
    assert_eq!(settings["mcp"]["docs"], theirs["mcp"]["docs"]);
    // OpenCode as the person runs it, with the variables their shell
    // profile loads, and no network but loopback.
    let mut shell = bob.profile();
    shell.push(("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()));
    shell.push(("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()));
    let listed = bob.run(&opencode, &["mcp", "list"], &shell);
    let plain = regex::Regex::new("\x1b\\[[0-9;]*m")
        .unwrap()
        .replace_all(&listed, "");
    assert!(plain.contains("✓ crosstalk connected"), "{plain}");
    assert!(plain.contains(&format!("{}/mcp", app.url())), "{plain}");
    assert!(plain.contains("○ docs disabled"), "{plain}");

    // A session is OpenCode's once its first turn starts; from then on the
    // plugin's waiter holds it.
    let env = bob.with(&shell);
    let terminal = Terminal::start(&bob.project(), &env, &opencode, &[]);
    terminal.until_screen("gpt-test");
    // OpenCode has no hook that takes a message as a turn ends: the plugin
    // prompts the session, which OpenCode takes after a turn it is in.
    woken_while_idle("OpenCode", &app, &alice_token, &model, &terminal, None).await;
    drop(terminal);

    // The relay away never holds OpenCode up.
    let away = relay_away(&shell);
    let started = Instant::now();
    let out = bob.run(&opencode, &["run", "say OK"], &away);
    assert!(out.contains("OK."), "{out}");
    println!(
        "OpenCode, the relay away: a turn took {:?}",
        started.elapsed()
    );
}

/// What the fake model was sent, and the wake-up of whoever waits for its
/// next request: the state its handlers share with the test.
#[derive(Clone, Default)]
struct Requests {
    sent: Arc<Mutex<Vec<Request>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Requests {
    /// Records a request, and wakes whoever waits for one.
    fn record(&self, text: &str, offered_send: bool) {
        self.sent.lock().unwrap().push(Request {
            at: Instant::now(),
            text: text.to_owned(),
            offered_send,
        });
        self.arrived.notify_waiters();
    }
}

/// A request's newest user text, when it came, and whether it offered
/// crosstalk's `send_message`.
#[derive(Clone, Debug)]
struct Request {
    at: Instant,
    text: String,
    offered_send: bool,
}

/// A fake model API in two vendors' wire formats: OpenAI's Responses API
/// (Codex) and Gemini's `generateContent`/`streamGenerateContent` (Gemini
/// CLI). Each streams its answer as the real events, and answers the newest
/// `<channel>` block in a turn with crosstalk's `send_message` in its
/// thread.
struct FakeModel {
    url: String,
    requests: Requests,
}

impl FakeModel {
    async fn start() -> FakeModel {
        let requests = Requests::default();
        let app = Router::new()
            .route("/v1/responses", post(responses))
            .route("/v1beta/models/{call}", post(gemini))
            .with_state(requests.clone());
        FakeModel {
            url: crate::support::serve(app).await,
            requests,
        }
    }

    /// Waits until a turn whose user text says `text` reached the model.
    async fn until_asked(&self, text: &str) {
        tokio::time::timeout(PATIENCE, async {
            loop {
                let next = self.requests.arrived.notified();
                if self
                    .requests
                    .sent
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|r| r.text.contains(text))
                {
                    return;
                }
                next.await;
            }
        })
        .await
        .expect("the model was asked");
    }

    /// When the model was first shown message `id`, and that turn's text,
    /// which offered crosstalk's `send_message` to answer with.
    fn shown(&self, id: i64) -> (Instant, String) {
        let marker = format!("message_id=\"{id}\"");
        let requests = self.requests.sent.lock().unwrap();
        let first = requests
            .iter()
            .find(|r| r.text.contains(&marker))
            .unwrap_or_else(|| panic!("the model was never shown {id}: {requests:#?}"));
        assert!(
            first.offered_send,
            "that turn offered crosstalk's send_message: {first:#?}"
        );
        (first.at, first.text.clone())
    }

    /// Every request so far, for a failure's message.
    fn sent(&self) -> Vec<Request> {
        self.requests.sent.lock().unwrap().clone()
    }
}

/// What the fake model answers: the tool call that answers a block in its
/// thread, or a few words.
fn answer(text: &str, after_a_result: bool) -> Result<Value, &'static str> {
    match newest_channel(text) {
        Some(attributes) if !after_a_result => {
            let get = |name: &str| attributes.get(name).cloned().unwrap_or_default();
            Ok(json!({
                "to": get("from"),
                "thread_id": get("thread_id").parse::<i64>().unwrap_or_default(),
                "body": format!("answer to {}", get("message_id")),
            }))
        }
        _ if after_a_result => Err("Sent."),
        _ => Err("OK."),
    }
}

/// Gemini's API: `MODEL:streamGenerateContent?alt=sse` for turns, and
/// `MODEL:generateContent` for its side requests (the router's JSON).
async fn gemini(
    State(requests): State<Requests>,
    axum::extract::Path(call): axum::extract::Path<String>,
    axum::Json(request): axum::Json<Value>,
) -> axum::response::Response {
    let contents = request["contents"].as_array().cloned().unwrap_or_default();
    let parts = contents
        .last()
        .and_then(|c| c["parts"].as_array().cloned())
        .unwrap_or_default();
    let text = parts
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let after_a_result = parts.iter().any(|p| p.get("functionResponse").is_some());
    let reply = if request["generationConfig"]["responseMimeType"] == "application/json" {
        // The model router asks how hard the request is.
        json!([{ "text": json!({ "complexity_reasoning": "simple", "complexity_score": 5 }).to_string() }])
    } else {
        let send = request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["functionDeclarations"].as_array())
            .flatten()
            .filter_map(|f| f["name"].as_str())
            .find(|name| name.ends_with("send_message"))
            .map(str::to_owned);
        requests.record(&text, send.is_some());
        match answer(&text, after_a_result) {
            Ok(args) => {
                let name = send.unwrap_or_else(|| "send_message".into());
                json!([{ "functionCall": { "name": name, "args": args } }])
            }
            Err(words) => json!([{ "text": words }]),
        }
    };
    let chunk = json!({
        "candidates": [{ "content": { "role": "model", "parts": reply },
                         "finishReason": "STOP", "index": 0 }],
        "usageMetadata": { "promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15 },
    });
    if call.contains(":streamGenerateContent") {
        (
            [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
            format!("data: {chunk}\r\n\r\n"),
        )
            .into_response()
    } else {
        axum::Json(chunk).into_response()
    }
}

async fn responses(
    State(requests): State<Requests>,
    axum::Json(request): axum::Json<Value>,
) -> impl IntoResponse {
    let input = request["input"].as_array().cloned().unwrap_or_default();
    let user_text = input
        .iter()
        .rev()
        .find(|item| item["role"] == "user")
        .map(|item| {
            item["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let last_is_result = input
        .last()
        .is_some_and(|item| item["type"] == "function_call_output");
    // Codex offers an MCP server's tools as a namespace; OpenCode as
    // functions named for the server.
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let send = tools.iter().find_map(|t| {
        let named = |t: &Value| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("send_message"))
        };
        if t["type"] == "namespace" && t["tools"].as_array().is_some_and(|ts| ts.iter().any(named))
        {
            Some((t["name"].clone(), json!("send_message")))
        } else if t["type"] == "function" && named(t) {
            Some((Value::Null, t["name"].clone()))
        } else {
            None
        }
    });
    requests.record(&user_text, send.is_some());
    let item = match (answer(&user_text, last_is_result), send) {
        (Ok(arguments), Some((namespace, name))) => json!({
            "type": "function_call", "id": format!("fc_{}", unique()),
            "call_id": format!("call_{}", unique()), "status": "completed",
            "namespace": namespace, "name": name,
            "arguments": arguments.to_string(),
        }),
        // A side request with no tools (a title) gets words.
        (Ok(_), None) => message_item("OK."),
        (Err(text), _) => message_item(text),
    };
    let id = format!("resp_{}", unique());
    let response = json!({ "id": id, "object": "response", "status": "in_progress",
                           "model": request["model"], "output": [] });
    let mut done = response.clone();
    done["status"] = json!("completed");
    done["output"] = json!([item]);
    done["usage"] = json!({ "input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                            "input_tokens_details": { "cached_tokens": 0 },
                            "output_tokens_details": { "reasoning_tokens": 0 } });
    // A message is added empty and its text streamed, as the API does.
    let text = item["content"][0]["text"].as_str().map(str::to_owned);
    let mut added = item.clone();
    if text.is_some() {
        added["content"] = json!([]);
    }
    let mut events = vec![
        (
            "response.created",
            json!({ "type": "response.created", "response": response }),
        ),
        (
            "response.output_item.added",
            json!({ "type": "response.output_item.added", "output_index": 0, "item": added }),
        ),
    ];
    if let Some(text) = text {
        events.push((
            "response.output_text.delta",
            json!({ "type": "response.output_text.delta", "item_id": item["id"],
                    "output_index": 0, "content_index": 0, "delta": text }),
        ));
    }
    events.extend([
        (
            "response.output_item.done",
            json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
        ),
        (
            "response.completed",
            json!({ "type": "response.completed", "response": done }),
        ),
    ]);
    let body: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        body,
    )
}

/// An assistant message of `text`, as the Responses API gives it.
fn message_item(text: &str) -> Value {
    json!({
        "type": "message", "id": format!("msg_{}", unique()), "role": "assistant",
        "status": "completed",
        "content": [{ "type": "output_text", "text": text, "annotations": [] }],
    })
}

/// The attributes of the last `<channel …>` tag in `text`.
fn newest_channel(text: &str) -> Option<std::collections::HashMap<String, String>> {
    let tag = regex::Regex::new(r#"<channel ([^>]*)>"#).unwrap();
    let attribute = regex::Regex::new(r#"(\w+)="([^"]*)""#).unwrap();
    let last = tag.captures_iter(text).last()?;
    Some(
        attribute
            .captures_iter(&last[1])
            .map(|a| (a[1].to_owned(), a[2].to_owned()))
            .collect(),
    )
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
