//! `crosstalk demo`: a real relay on a spare loopback port with a throwaway
//! database, and two agents talking to it over MCP with their own tokens.

use crate::agent::{Agent, Outcome};
use crate::relay::Team;
use anyhow::{Context, anyhow};
use serde_json::{Value, json};
use std::{future::Future, time::Instant};

/// One of the demo's agents: its MCP connection and the name it prints as.
struct Speaker {
    name: &'static str,
    agent: Agent,
}

impl Speaker {
    async fn connect(name: &'static str, url: &str, token: &str) -> anyhow::Result<Speaker> {
        let agent = Agent::connect(url, token)
            .await
            .with_context(|| format!("connecting {name}"))?;
        Ok(Speaker { name, agent })
    }

    /// Calls a tool that must succeed.
    async fn call(&self, tool: &'static str, arguments: Value) -> anyhow::Result<Value> {
        self.attempt(tool, arguments)
            .await?
            .map_err(|message| anyhow!("{tool} failed: {message}"))
    }

    /// Calls a tool; the inner `Err` carries the relay's refusal.
    async fn attempt(
        &self,
        tool: &'static str,
        arguments: Value,
    ) -> anyhow::Result<Result<Value, String>> {
        match self.agent.call(tool, arguments).await {
            Outcome::Protocol(failure) => Err(anyhow!("{tool}: {failure}")),
            answered => Ok(answered.into_result()),
        }
    }

    fn says(&self, what: impl AsRef<str>) {
        println!("  {:<6} {}", self.name, what.as_ref());
    }
}

fn show(message: &Value) -> String {
    format!(
        "#{} [{}] {}: {}",
        message["id"],
        message["type"].as_str().unwrap_or(""),
        message["from"].as_str().unwrap_or(""),
        message["body"].as_str().unwrap_or("")
    )
}

/// Plays the demo conversation against the relay at `url`, whose team is
/// `team`; then awaits `stop`, which stops the relay.
pub async fn run(
    url: &str,
    team: &Team,
    stop: impl Future<Output = std::io::Result<()>>,
) -> anyhow::Result<()> {
    // Add two people the way `crosstalk add` does.
    let alice_token = team.add("alice", Some("Alice")).await?.token;
    let bob_token = team.add("bob", Some("Bob")).await?.token;
    println!("crosstalk demo: a real relay on {url}, with a throwaway database.");
    println!("alice and bob connect over MCP (streamable HTTP), each with their own token.\n");
    let alice = Speaker::connect("alice", url, alice_token.expose()).await?;
    let bob = Speaker::connect("bob", url, bob_token.expose()).await?;

    let (bob, thread_id) = a_question_in_a_thread(&alice, bob).await?;
    a_channel_exchange(&alice, &bob).await?;
    a_pasted_key_is_refused(&alice, &bob).await?;
    who_is_on_the_team(&bob).await?;
    the_team_page(url, alice_token.expose(), &thread_id).await?;

    alice.agent.close().await?;
    bob.agent.close().await?;
    stop.await.context("stopping the relay")?;
    println!("\nDone: the relay stopped and its database was deleted.");
    Ok(())
}

/// 1: alice asks bob, whose agent is already waiting on its inbox; bob
/// answers in the thread. Returns bob (he waited in a task of his own) and
/// the thread.
async fn a_question_in_a_thread(alice: &Speaker, bob: Speaker) -> anyhow::Result<(Speaker, Value)> {
    println!("1. A question in a thread, to an agent that is already waiting");
    bob.says("check_inbox(timeout_seconds: 20)  … waiting");
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let inbox = bob
            .call("check_inbox", json!({ "timeout_seconds": 20 }))
            .await;
        (bob, started.elapsed(), inbox)
    });
    tokio::task::yield_now().await;
    let question =
        "Which migration renamed users.email to users.login? I need it for the rollback plan.";
    let sent = alice
        .call(
            "send_message",
            json!({ "to": "bob", "type": "QUESTION", "body": question }),
        )
        .await?;
    alice.says(format!(
        "send_message(to: bob, QUESTION) -> thread {}",
        sent["thread_id"]
    ));
    let (bob, waited, inbox) = waiting.await?;
    let inbox = inbox?;
    let received = &inbox["messages"][0];
    bob.says(format!(
        "woke after {} ms with {}",
        waited.as_millis(),
        show(received)
    ));
    bob.says(format!(
        "notice: {}",
        inbox["notice"].as_str().unwrap_or("")
    ));
    let thread_id = received["thread_id"].clone();
    bob.call(
        "send_message",
        json!({ "to": "alice", "thread_id": thread_id, "type": "ANSWER",
                "body": "0042_rename_email_to_login.sql; its down-migration restores the old column." }),
    )
    .await?;
    bob.says("send_message(to: alice, ANSWER) in the same thread");
    let thread = alice
        .call("read_thread", json!({ "thread_id": thread_id }))
        .await?;
    alice.says(format!("read_thread({thread_id}):"));
    for message in thread["messages"].as_array().into_iter().flatten() {
        println!("           {}", show(message));
    }
    Ok((bob, thread_id))
}

/// 2: a channel exchange, QUESTION -> ANSWER -> DONE.
async fn a_channel_exchange(alice: &Speaker, bob: &Speaker) -> anyhow::Result<()> {
    println!("\n2. A channel exchange, QUESTION -> ANSWER -> DONE");
    let asked = alice
        .call(
            "post_message",
            json!({ "channel": "release", "type": "QUESTION",
                                       "body": "Is main green enough to tag 1.4?" }),
        )
        .await?;
    alice.says(format!(
        "post_message(#release, QUESTION) -> id {}",
        asked["id"]
    ));
    let seen = bob
        .call(
            "wait_for_message",
            json!({ "channel": "release", "since_id": 0, "timeout_s": 5 }),
        )
        .await?;
    bob.says(format!(
        "wait_for_message(#release) -> {}",
        show(&seen["messages"][0])
    ));
    let answered = bob.call("post_message", json!({ "channel": "release", "type": "ANSWER", "reply_to": asked["id"],
                                     "body": "Yes: CI passed on 9c1e7d0, nothing open against 1.4." }))
        .await?;
    bob.says(format!(
        "post_message(#release, ANSWER, reply_to: {}) -> id {}",
        asked["id"], answered["id"]
    ));
    let answer = alice
        .call(
            "wait_for_message",
            json!({ "channel": "release", "since_id": asked["id"], "timeout_s": 5 }),
        )
        .await?;
    alice.says(format!(
        "wait_for_message(#release) -> {}",
        show(&answer["messages"][0])
    ));
    let done = alice
        .call(
            "post_message",
            json!({ "channel": "release", "type": "DONE", "body": "Tagged v1.4.0. Thanks!" }),
        )
        .await?;
    alice.says(format!("post_message(#release, DONE) -> id {}", done["id"]));
    let page = bob
        .call(
            "get_messages",
            json!({ "channel": "release", "since_id": 0 }),
        )
        .await?;
    bob.says("get_messages(#release):");
    for message in page["messages"].as_array().into_iter().flatten() {
        println!("           {}", show(message));
    }
    Ok(())
}

/// 3: a pasted key is refused, and nothing is stored.
async fn a_pasted_key_is_refused(alice: &Speaker, bob: &Speaker) -> anyhow::Result<()> {
    println!("\n3. A pasted key is refused, and nothing is stored");
    let refused = alice
        .attempt(
            "send_message",
            json!({ "to": "bob", "body": "use AKIAIOSFODNN7EXAMPLE with the staging bucket" }),
        )
        .await?;
    match refused {
        Err(message) => alice.says(format!("send_message -> {message}")),
        Ok(_) => return Err(anyhow!("the relay stored a message carrying an AWS key")),
    }
    let inbox = bob.call("check_inbox", json!({})).await?;
    bob.says(format!(
        "check_inbox -> {} new messages",
        inbox["messages"].as_array().map_or(0, Vec::len)
    ));
    Ok(())
}

/// 4: who is on the team.
async fn who_is_on_the_team(bob: &Speaker) -> anyhow::Result<()> {
    println!("\n4. Who is on the team");
    let peers = bob.call("list_peers", json!({})).await?;
    for peer in peers["peers"].as_array().into_iter().flatten() {
        println!(
            "           {} ({}), last seen {}",
            peer["handle"].as_str().unwrap_or(""),
            peer["name"].as_str().unwrap_or(""),
            peer["last_seen"].as_str().unwrap_or("never")
        );
    }
    Ok(())
}

/// 5: the team page, as a person sees it.
async fn the_team_page(url: &str, token: &str, thread_id: &Value) -> anyhow::Result<()> {
    println!("\n5. The team page, as a person sees it");
    let page = reqwest::Client::new()
        .get(format!("{url}/"))
        .basic_auth("alice", Some(token))
        .send()
        .await?;
    let status = page.status();
    let html = page.text().await?;
    let listed = html.contains("#release") && html.contains(&format!("/threads/{thread_id}"));
    println!(
        "  GET {url}/ with Basic credentials -> {status}, {} bytes of HTML",
        html.len()
    );
    if !listed {
        return Err(anyhow!(
            "the team page does not list #release and thread {thread_id}"
        ));
    }
    println!("           it lists #release and thread {thread_id}");
    Ok(())
}
