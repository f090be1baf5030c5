//! An A2A task as a sent message's ledger shows it: the task is the
//! question (its id the message's, its context the thread's), and its
//! state is read from what the relay keeps, never kept apart from it.
//!
//! | what the relay keeps | the task's state |
//! |---|---|
//! | the recipient replied in the thread, asking back | `INPUT_REQUIRED` |
//! | the recipient replied (or answered: the reply is gone) | `COMPLETED` |
//! | acknowledged `done` | `COMPLETED` |
//! | acknowledged `rejected` | `REJECTED` |
//! | acknowledged `blocked` | `INPUT_REQUIRED` |
//! | read by the recipient's agent | `WORKING` |
//! | waiting, or pushed but not confirmed | `SUBMITTED` |
//!
//! A push not yet confirmed is still `SUBMITTED`: a stream was written to,
//! but nobody is known to have it. The ledger itself is in the task's
//! `metadata.delivery`, as the REST API shows it.

use crate::model::{AckResult, Expects, Message, Millis};
use crate::wire::{DeliveryView, timestamp};
use serde::Serialize;

/// The A2A 1.0 task states the relay can tell (`TASK_STATE_…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<A2aMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Metadata {
    /// Where the question stands with its recipient, as the REST API says.
    pub delivery: DeliveryView,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<A2aMessage>,
    /// When the task came to this state.
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct A2aMessage {
    pub message_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: &'static str,
    pub parts: Vec<TextPart>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TextPart {
    pub text: String,
    pub media_type: &'static str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    pub name: &'static str,
    pub parts: Vec<TextPart>,
}

impl A2aMessage {
    /// A text message of the task: the question (`ROLE_USER`) or an answer
    /// (`ROLE_AGENT`).
    pub fn text(
        message_id: String,
        task: Option<(&str, &str)>,
        role: &'static str,
        text: &str,
    ) -> A2aMessage {
        A2aMessage {
            message_id,
            context_id: task.map(|(_, context)| context.to_owned()),
            task_id: task.map(|(id, _)| id.to_owned()),
            role,
            parts: vec![TextPart {
                text: text.to_owned(),
                media_type: "text/plain",
            }],
        }
    }
}

/// What the ledger and the answer say of the question: its state, since
/// when, and what the recipient said (a reply's body, or an
/// acknowledgement's note).
fn standing(sent: &Message, answer: Option<&Message>) -> (TaskState, Millis, Option<String>) {
    let delivery = sent.delivery.clone().unwrap_or_default();
    if let Some(answer) = answer {
        let asks_back = answer
            .delivery
            .as_ref()
            .is_some_and(|d| d.expects == Expects::Reply);
        let state = match asks_back {
            true => TaskState::InputRequired,
            false => TaskState::Completed,
        };
        return (state, answer.created_at, Some(answer.body.clone()));
    }
    if let Some(ack) = &delivery.ack {
        let state = match ack.result {
            AckResult::Done => TaskState::Completed,
            AckResult::Rejected => TaskState::Rejected,
            AckResult::Blocked => TaskState::InputRequired,
        };
        return (state, ack.at, ack.note.clone());
    }
    match (delivery.answered_at, delivery.read_at) {
        (Some(at), _) => (TaskState::Completed, at, None),
        (None, Some(at)) => (TaskState::Working, at, None),
        (None, None) => (TaskState::Submitted, sent.created_at, None),
    }
}

/// The task as it stood once its question was read and before anything
/// came of it (`WORKING`), if it was read.
pub fn as_read(sent: &Message, history_length: Option<u32>) -> Option<Task> {
    sent.delivery.as_ref()?.read_at?;
    let mut read = sent.clone();
    if let Some(delivery) = read.delivery.as_mut() {
        delivery.answered_at = None;
        delivery.ack = None;
    }
    Some(task(&read, None, history_length))
}

/// The task a sent direct message is, with its recipient's answer, if any;
/// at most `history_length` messages of history (the question, then the
/// answer), none for 0.
pub fn task(sent: &Message, answer: Option<&Message>, history_length: Option<u32>) -> Task {
    let id = sent.id.0.to_string();
    let context = sent.place.thread().map(|t| t.0).unwrap_or_default();
    let context_id = context.to_string();
    let (state, since, said) = standing(sent, answer);
    let of_task = Some((id.as_str(), context_id.as_str()));
    let answered = said.map(|text| {
        let message_id = match answer {
            Some(answer) => answer.id.0.to_string(),
            None => format!("{id}-ack"),
        };
        A2aMessage::text(message_id, of_task, "ROLE_AGENT", &text)
    });
    let artifacts = match (state, &answered) {
        (TaskState::Completed, Some(answered)) => vec![Artifact {
            artifact_id: format!("answer-{}", answered.message_id),
            name: "answer",
            parts: answered.parts.clone(),
        }],
        _ => Vec::new(),
    };
    let mut history = vec![A2aMessage::text(
        id.clone(),
        of_task,
        "ROLE_USER",
        &sent.body,
    )];
    history.extend(answered.clone());
    let keep = history_length.map_or(history.len(), |n| n as usize);
    let history = history.split_off(history.len().saturating_sub(keep));
    Task {
        status: TaskStatus {
            state,
            message: answered,
            timestamp: timestamp(since),
        },
        artifacts,
        history,
        metadata: sent.delivery.as_ref().map(|d| Metadata {
            delivery: DeliveryView::from(d),
        }),
        id,
        context_id,
    }
}

/// The task a refused question is: `REJECTED`, saying why, in a context of
/// its own. Nothing was stored, so it is not kept either: `GetTask` does
/// not find it.
pub fn rejected(message_id: &str, reason: String) -> Task {
    let id = format!("rejected-{message_id}");
    Task {
        status: TaskStatus {
            state: TaskState::Rejected,
            message: Some(A2aMessage::text(
                format!("{id}-reason"),
                None,
                "ROLE_AGENT",
                &reason,
            )),
            timestamp: timestamp(crate::model::now_millis()),
        },
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: None,
        context_id: id.clone(),
        id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Ack, Delivery, Handle, MessageId, Place, ThreadId};

    fn message(id: i64, from: &str, to: &str, body: &str, delivery: Delivery) -> Message {
        Message {
            id: MessageId(id),
            place: Place::Thread(ThreadId(7)),
            from: Handle::parse(from).unwrap(),
            to: Some(Handle::parse(to).unwrap()),
            kind: "QUESTION".into(),
            body: body.into(),
            reply_to: None,
            created_at: 1_000 * id,
            expires_at: i64::MAX,
            delivery: Some(delivery),
            attachments: Vec::new(),
        }
    }

    fn state_of(sent: Delivery, answer: Option<Delivery>) -> TaskState {
        let sent = message(1, "alice", "bob", "which port?", sent);
        let answer = answer.map(|d| message(2, "bob", "alice", "8080", d));
        task(&sent, answer.as_ref(), None).status.state
    }

    #[test]
    fn the_state_follows_the_ledger() {
        let read = Delivery {
            read_at: Some(5),
            ..Delivery::default()
        };
        let pushed = Delivery {
            pushed_at: Some(5),
            ..Delivery::default()
        };
        let acked = |result| Delivery {
            ack: Some(Ack {
                result,
                note: Some("see #ops".into()),
                at: 9,
            }),
            ..read.clone()
        };
        let asking_back = Delivery {
            expects: Expects::Reply,
            ..Delivery::default()
        };
        assert_eq!(state_of(Delivery::default(), None), TaskState::Submitted);
        assert_eq!(state_of(pushed, None), TaskState::Submitted);
        assert_eq!(state_of(read.clone(), None), TaskState::Working);
        assert_eq!(
            state_of(read.clone(), Some(Delivery::default())),
            TaskState::Completed
        );
        assert_eq!(
            state_of(read.clone(), Some(asking_back)),
            TaskState::InputRequired
        );
        assert_eq!(state_of(acked(AckResult::Done), None), TaskState::Completed);
        assert_eq!(
            state_of(acked(AckResult::Rejected), None),
            TaskState::Rejected
        );
        assert_eq!(
            state_of(acked(AckResult::Blocked), None),
            TaskState::InputRequired
        );
        let answered_gone = Delivery {
            answered_at: Some(9),
            ..read
        };
        assert_eq!(state_of(answered_gone, None), TaskState::Completed);
    }

    #[test]
    fn a_completed_task_carries_the_answer_as_its_status_and_artifact() {
        let sent = message(1, "alice", "bob", "which port?", Delivery::default());
        let answer = message(2, "bob", "alice", "8080", Delivery::default());
        let task = serde_json::to_value(task(&sent, Some(&answer), None)).unwrap();
        assert_eq!(task["id"], "1");
        assert_eq!(task["contextId"], "7");
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(task["status"]["message"]["parts"][0]["text"], "8080");
        assert_eq!(task["status"]["timestamp"], "1970-01-01T00:00:02.000Z");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "8080");
        assert_eq!(task["history"][0]["role"], "ROLE_USER");
        assert_eq!(task["history"][0]["parts"][0]["text"], "which port?");
        assert_eq!(task["metadata"]["delivery"]["state"], "waiting");

        let short = serde_json::to_value(super::task(&sent, Some(&answer), Some(1))).unwrap();
        assert_eq!(short["history"].as_array().unwrap().len(), 1);
        assert_eq!(short["history"][0]["role"], "ROLE_AGENT");
        let none = serde_json::to_value(super::task(&sent, Some(&answer), Some(0))).unwrap();
        assert!(none.get("history").is_none());
    }
}
