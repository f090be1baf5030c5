//! Streaming (`SendStreamingMessage`, `SubscribeToTask`): a task as
//! Server-Sent Events, each a JSON-RPC response to the call. First the task
//! as it stands, then each change of its state as the ledger moves (read,
//! answered, acknowledged), until it ends (`COMPLETED`, `REJECTED`), asks
//! for input, or the caller goes away.
//!
//! The stream follows the question's thread (`Relay::thread_feed`), which
//! it subscribes to before it first reads the task, so no change between
//! the read and the subscription is missed; each wake-up that could change
//! the task (the recipient's message, the question's ledger published
//! again) reads it again, and only a changed state is sent.

use super::task::{Task, TaskState, task};
use crate::model::Message;
use crate::relay::{Caller, Feed, RelayResult, Update};
use crate::state::AppState;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use std::{convert::Infallible, time::Duration};

/// A comment this often keeps an idle stream's connection open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A streaming call's one answer (its result or its error), as a stream
/// of one event: what the call's client reads.
pub(super) fn once(answer: Value) -> Response {
    let event = Event::default().data(answer.to_string());
    Sse::new(futures::stream::once(async { Ok::<_, Infallible>(event) })).into_response()
}

/// Whether a task in `state` has nothing more to say on a stream.
fn settled(state: TaskState) -> bool {
    !matches!(state, TaskState::Submitted | TaskState::Working)
}

/// The stream of the caller's sent message `sent`, answering the call `id`.
pub(super) async fn follow(
    state: &AppState,
    caller: &Caller,
    id: Value,
    sent: &Message,
    history_length: Option<u32>,
) -> RelayResult<Response> {
    let thread_id = sent.place.thread().expect("a task is a direct message");
    let feed = state
        .relay
        .thread_feed(caller, thread_id, Some(sent.id))
        .await?;
    let (sent, answer) = state.relay.sent_and_answer(caller, sent.id).await?;
    let first = task(&sent, answer.as_ref(), history_length);
    let opening = event(&id, json!({ "task": first }));
    let changes = Changes {
        feed,
        state: state.clone(),
        caller: caller.clone(),
        sent,
        last: first.status.state,
    };
    let rest = futures::stream::unfold(changes, |mut changes| async move {
        let changed = changes.next().await?;
        Some((changed, changes))
    })
    .map(move |changed| {
        let update = json!({
            "taskId": changed.id,
            "contextId": changed.context_id,
            "status": changed.status,
            "final": settled(changed.status.state),
        });
        event(&id, json!({ "statusUpdate": update }))
    });
    let events = match settled(first.status.state) {
        true => futures::stream::once(async { opening }).left_stream(),
        false => futures::stream::once(async { opening })
            .chain(rest)
            .right_stream(),
    };
    let events = events.map(Ok::<_, Infallible>);
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// One JSON-RPC response to the call `id`, as an event.
fn event(id: &Value, result: Value) -> Event {
    Event::default().data(json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string())
}

/// What follows a task: its thread's feed, and the state last sent.
struct Changes {
    feed: Feed,
    state: AppState,
    caller: Caller,
    sent: Message,
    last: TaskState,
}

impl Changes {
    /// The task once its state changed; `None` once it settled, or when
    /// the feed ends (the relay stops, the caller's token is revoked) or
    /// the task cannot be read.
    async fn next(&mut self) -> Option<Task> {
        if settled(self.last) {
            return None;
        }
        loop {
            let could_change = match self.feed.next().await? {
                Update::New(message) => Some(&message.from) == self.sent.to.as_ref(),
                Update::Delivery(message) => message.id == self.sent.id,
            };
            if !could_change {
                continue;
            }
            let (sent, answer) = self
                .state
                .relay
                .sent_and_answer(&self.caller, self.sent.id)
                .await
                .ok()?;
            let now = task(&sent, answer.as_ref(), Some(0));
            if now.status.state != self.last {
                self.last = now.status.state;
                return Some(now);
            }
        }
    }
}
