//! A message's delivery ledger as its sender and the team see it: its
//! state, its times, what it expects and how it was acknowledged.

use super::timestamp;
use crate::model::{AckResult, Delivery, DeliveryState, Expects, Via};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The delivery ledger of an addressed message, as its sender and the team
/// see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeliveryView {
    /// `waiting` (nobody has it yet), `pushed` (written to a listening
    /// session of the recipient, not yet confirmed), `read` (their agent
    /// read it), `answered` (they replied) or `acked` (they acknowledged
    /// it: see `ack`).
    pub state: DeliveryStateView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<String>,
    /// How many times it was offered to the recipient's listening
    /// sessions, when more than once (as a push's `offer` attribute).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offers: Option<u32>,
    /// `true` once it was offered the most times a message is offered (3)
    /// and none was confirmed: it is not pushed again, it waits for the
    /// recipient's inbox check, and the recipient is told. Its state stays
    /// `pushed` (a state never goes back); a flag, not a state, because it
    /// is where the relay stopped, not where the message got.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pushes_stopped: bool,
    /// The path that last brought it to the recipient's agent: `channel`
    /// (a Claude Code channel event), `wake` (a Claude Code hook that woke
    /// the session, or came in between its steps), `hook` (a Claude Code
    /// hook that added it to the person's prompt), `stream` (a REST inbox
    /// stream), `inbox` (an inbox check). None while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<ViaView>,
    /// What its sender expects of the recipient: `reply` (an answer in its
    /// conversation) or `ack` (an acknowledgement, `ack_message`); absent
    /// for nothing. An acknowledgement or an answer satisfies either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expects: Option<ExpectsView>,
    /// When the answer or acknowledgement is due; past it, unanswered, the
    /// message comes back to its sender as an `OVERDUE` item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_at: Option<String>,
    /// When it came back to its sender, overdue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overdue_at: Option<String>,
    /// The recipient's acknowledgement (the latest, if they gave several).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack: Option<AckView>,
}

/// What a message expects of its recipient, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExpectsView {
    Reply,
    Ack,
    None,
}

impl From<Expects> for ExpectsView {
    fn from(expects: Expects) -> Self {
        match expects {
            Expects::Reply => ExpectsView::Reply,
            Expects::Ack => ExpectsView::Ack,
            Expects::Nothing => ExpectsView::None,
        }
    }
}

impl From<ExpectsView> for Expects {
    fn from(expects: ExpectsView) -> Self {
        match expects {
            ExpectsView::Reply => Expects::Reply,
            ExpectsView::Ack => Expects::Ack,
            ExpectsView::None => Expects::Nothing,
        }
    }
}

/// How a recipient acknowledged a message, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AckResultView {
    Done,
    Blocked,
    Rejected,
}

impl From<AckResult> for AckResultView {
    fn from(result: AckResult) -> Self {
        match result {
            AckResult::Done => AckResultView::Done,
            AckResult::Blocked => AckResultView::Blocked,
            AckResult::Rejected => AckResultView::Rejected,
        }
    }
}

impl From<AckResultView> for AckResult {
    fn from(result: AckResultView) -> Self {
        match result {
            AckResultView::Done => AckResult::Done,
            AckResultView::Blocked => AckResult::Blocked,
            AckResultView::Rejected => AckResult::Rejected,
        }
    }
}

/// A recipient's acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AckView {
    /// `done`, `blocked` or `rejected`.
    pub result: AckResultView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub at: String,
}

/// A path of [`DeliveryView::via`], by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ViaView {
    Channel,
    Wake,
    Hook,
    Stream,
    Inbox,
}

impl From<Via> for ViaView {
    fn from(via: Via) -> Self {
        match via {
            Via::Channel => ViaView::Channel,
            Via::Wake => ViaView::Wake,
            Via::Hook => ViaView::Hook,
            Via::Stream => ViaView::Stream,
            Via::Inbox => ViaView::Inbox,
        }
    }
}

impl From<ViaView> for Via {
    fn from(via: ViaView) -> Self {
        match via {
            ViaView::Channel => Via::Channel,
            ViaView::Wake => Via::Wake,
            ViaView::Hook => Via::Hook,
            ViaView::Stream => Via::Stream,
            ViaView::Inbox => Via::Inbox,
        }
    }
}

fn is_false(flag: &bool) -> bool {
    !flag
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStateView {
    Waiting,
    Pushed,
    Read,
    Answered,
    Acked,
}

impl From<DeliveryState> for DeliveryStateView {
    fn from(state: DeliveryState) -> Self {
        match state {
            DeliveryState::Waiting => DeliveryStateView::Waiting,
            DeliveryState::Pushed => DeliveryStateView::Pushed,
            DeliveryState::Read => DeliveryStateView::Read,
            DeliveryState::Answered => DeliveryStateView::Answered,
            DeliveryState::Acked => DeliveryStateView::Acked,
        }
    }
}

impl From<DeliveryStateView> for DeliveryState {
    fn from(state: DeliveryStateView) -> Self {
        match state {
            DeliveryStateView::Waiting => DeliveryState::Waiting,
            DeliveryStateView::Pushed => DeliveryState::Pushed,
            DeliveryStateView::Read => DeliveryState::Read,
            DeliveryStateView::Answered => DeliveryState::Answered,
            DeliveryStateView::Acked => DeliveryState::Acked,
        }
    }
}

impl From<&Delivery> for DeliveryView {
    fn from(d: &Delivery) -> Self {
        DeliveryView {
            state: d.state().into(),
            pushed_at: d.pushed_at.map(timestamp),
            read_at: d.read_at.map(timestamp),
            answered_at: d.answered_at.map(timestamp),
            offers: (d.offers > 1).then_some(d.offers),
            pushes_stopped: d.pushes_stopped(),
            via: d.via.map(ViaView::from),
            expects: d.expects.is_owed().then(|| d.expects.into()),
            due_at: d.due_at.map(timestamp),
            overdue_at: d.overdue_at.map(timestamp),
            ack: d.ack.as_ref().map(|ack| AckView {
                result: ack.result.into(),
                note: ack.note.clone(),
                at: timestamp(ack.at),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MAX_OFFERS;

    #[test]
    fn a_ledger_whose_pushes_stopped_says_so_and_how_many_offers() {
        let stopped = Delivery {
            pushed_at: Some(0),
            offers: MAX_OFFERS,
            lease_until: Some(5),
            ..Delivery::default()
        };
        assert_eq!(
            serde_json::to_value(DeliveryView::from(&stopped)).unwrap(),
            serde_json::json!({
                "state": "pushed",
                "pushed_at": "1970-01-01T00:00:00.000Z",
                "offers": MAX_OFFERS,
                "pushes_stopped": true,
            })
        );
        let once = Delivery {
            offers: 1,
            ..stopped
        };
        assert_eq!(
            serde_json::to_value(DeliveryView::from(&once)).unwrap(),
            serde_json::json!({ "state": "pushed", "pushed_at": "1970-01-01T00:00:00.000Z" })
        );
        let schema = schemars::schema_for!(DeliveryView);
        let said = schema.as_value()["properties"]["pushes_stopped"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(said.contains(&format!("({MAX_OFFERS})")), "{said}");
    }
}
