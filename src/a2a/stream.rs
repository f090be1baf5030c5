//! Following a task: its state as the ledger moves (read, answered,
//! acknowledged), until it settles (`COMPLETED`, `REJECTED`,
//! `INPUT_REQUIRED`). A streaming call (`SendStreamingMessage`,
//! `SubscribeToTask`) sends each change as a Server-Sent Event, a JSON-RPC
//! response to the call; a blocking `SendMessage` waits for the task to
//! settle, at most [`MAX_WAIT`].
//!
//! A task is followed through its thread's feed (`Relay::thread_feed`),
//! subscribed to before the task is first read, so no change between the
//! read and the subscription is missed. Each wake-up that could change the
//! task (the recipient's message, the question's ledger published again)
//! reads it again, and so does a look every [`RECHECK`] (for what a feed
//! that fell behind skipped, or a question gone with its time): only a
//! changed state is sent. The feed holds one of the caller's wait slots;
//! when none is free, the task is answered as it stands, not followed.

use super::task::{Task, TaskState, as_read, task};
use crate::model::{Handle, Message, MessageId};
use crate::relay::{Caller, Feed, MAX_WAIT, RelayError, RelayResult, Update};
use crate::state::AppState;
use crate::wire::SSE_KEEP_ALIVE;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use std::{convert::Infallible, time::Duration};

/// How often a followed task is read again without a wake-up.
const RECHECK: Duration = Duration::from_secs(10);

/// Whether a task in `state` has nothing more to say.
fn settled(state: TaskState) -> bool {
    !matches!(state, TaskState::Submitted | TaskState::Working)
}

/// A followed task: what its thread's feed says, and the state last told.
pub(super) struct Following {
    feed: Option<Feed>,
    state: AppState,
    caller: Caller,
    id: MessageId,
    /// Whom the question is to: a message of theirs may answer it.
    recipient: Option<Handle>,
    history_length: Option<u32>,
    last: TaskState,
    /// A change found behind another in one look, told next.
    then: Option<Task>,
}

/// The caller's sent message `sent` as a task, and what follows it (none
/// once settled, or when the caller has no wait slot free).
pub(super) async fn follow(
    state: &AppState,
    caller: &Caller,
    sent: &Message,
    history_length: Option<u32>,
) -> RelayResult<(Task, Following)> {
    let Some(thread_id) = sent.place.thread() else {
        return Err(RelayError::NotFound(format!("{} is no task", sent.id)));
    };
    let feed = match state
        .relay
        .thread_feed(caller, thread_id, Some(sent.id))
        .await
    {
        Ok(feed) => Some(feed),
        Err(RelayError::TooManyWaits(_) | RelayError::Overloaded(_)) => None,
        Err(error) => return Err(error),
    };
    let (sent, answer) = state.relay.sent_and_answer(caller, sent.id).await?;
    let first = task(&sent, answer.as_ref(), history_length);
    let following = Following {
        feed,
        state: state.clone(),
        caller: caller.clone(),
        id: sent.id,
        recipient: sent.to.clone(),
        history_length,
        last: first.status.state,
        then: None,
    };
    Ok((first, following))
}

impl Following {
    /// The task once its state changed; `None` once it settled, when it
    /// is not followed, when the feed ends (the relay stops, the caller's
    /// token is revoked) or the task is gone.
    pub(super) async fn next(&mut self) -> Option<Task> {
        if let Some(then) = self.then.take() {
            self.last = then.status.state;
            return Some(then);
        }
        if settled(self.last) {
            return None;
        }
        let feed = self.feed.as_mut()?;
        loop {
            let could_change = tokio::select! {
                update = feed.next() => match update? {
                    Update::New(message) => Some(&message.from) == self.recipient.as_ref(),
                    Update::Delivery(message) => message.id == self.id,
                },
                () = tokio::time::sleep(RECHECK) => true,
            };
            if !could_change {
                continue;
            }
            let (sent, answer) = self
                .state
                .relay
                .sent_and_answer(&self.caller, self.id)
                .await
                .ok()?;
            let now = task(&sent, answer.as_ref(), self.history_length);
            if now.status.state == self.last {
                continue;
            }
            // Read and settled between two looks: the read is told too,
            // first, as the ledger has them.
            if self.last == TaskState::Submitted
                && settled(now.status.state)
                && let Some(read) = as_read(&sent, self.history_length)
            {
                self.last = TaskState::Working;
                self.then = Some(now);
                return Some(read);
            }
            self.last = now.status.state;
            return Some(now);
        }
    }

    /// The task once it settled, or as it stands after [`MAX_WAIT`].
    pub(super) async fn settle(mut self, mut task: Task) -> Task {
        let _ = tokio::time::timeout(MAX_WAIT, async {
            while let Some(changed) = self.next().await {
                task = changed;
            }
        })
        .await;
        task
    }
}

/// `first`, then each change `following` finds, as Server-Sent Events
/// answering the call `id`.
pub(super) fn events(id: Value, first: Task, following: Following) -> Response {
    let opening = event(&id, json!({ "task": first }));
    let changes = futures::stream::unfold(following, |mut following| async move {
        let changed = following.next().await?;
        Some((changed, following))
    })
    .map(move |changed| {
        let update = json!({
            "taskId": changed.id,
            "contextId": changed.context_id,
            "status": changed.status,
        });
        event(&id, json!({ "statusUpdate": update }))
    });
    let events = futures::stream::once(async { opening })
        .chain(changes)
        .map(Ok::<_, Infallible>);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE))
        .into_response()
}

/// A streaming call's one answer (its result or its error), as a stream
/// of one event: what the call's client reads.
pub(super) fn once(answer: Value) -> Response {
    let event = Event::default().data(answer.to_string());
    Sse::new(futures::stream::once(async { Ok::<_, Infallible>(event) })).into_response()
}

/// One JSON-RPC response to the call `id`, as an event.
fn event(id: &Value, result: Value) -> Event {
    Event::default().data(json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string())
}
