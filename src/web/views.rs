//! What the templates show: messages, times and counts as a person reads
//! them, and the frame (header and sidebar) around every page.

use super::{Rendering, markdown};
use crate::model::{
    Ack, ChannelSummary, Delivery, DeliveryState, Handle, Message, MessageId, Millis, Place, Via,
};
use crate::relay::{Caller, Identity, Listing, MAX_UNREAD, Peer, Relay, RelayResult, secrets};
use std::{collections::HashMap, sync::Arc};

/// "1 message", "2 messages".
pub fn plural(count: u64, one: &str, many: &str) -> String {
    if count == 1 {
        format!("1 {one}")
    } else {
        format!("{count} {many}")
    }
}

/// A moment, readable without script ("Nov 30, 07:00 UTC"), exact in its
/// `title`, and machine-readable for the script that makes it relative
/// and local ("3 min ago").
pub struct When {
    pub iso: String,
    pub shown: String,
    pub exact: String,
}

impl When {
    pub fn at(millis: Millis) -> When {
        let at = chrono::DateTime::from_timestamp_millis(millis).unwrap_or_default();
        When {
            iso: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            shown: at.format("%b %-d, %H:%M UTC").to_string(),
            exact: at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        }
    }
}

/// "99+" past the cap, nothing for none.
pub fn unread_label(count: u64) -> String {
    match count {
        0 => String::new(),
        n if n >= MAX_UNREAD => format!("{MAX_UNREAD}+"),
        n => n.to_string(),
    }
}

/// People's names by handle, for showing who said what.
pub struct Names(HashMap<String, String>);

impl Names {
    pub fn of(peers: &[Peer]) -> Names {
        Names(
            peers
                .iter()
                .map(|p| (p.handle.to_string(), p.name.clone()))
                .collect(),
        )
    }

    pub fn name(&self, handle: &str) -> String {
        self.0
            .get(handle)
            .cloned()
            .unwrap_or_else(|| handle.to_owned())
    }
}

/// A message as a page shows it.
pub struct MessageLine {
    pub id: i64,
    pub from_name: String,
    pub from: String,
    pub to: Option<String>,
    pub kind: String,
    /// The type as a CSS class: lowercase letters only.
    pub kind_class: String,
    pub when: When,
    pub reply_to: Option<i64>,
    /// The body, rendered from Markdown and made safe.
    pub html: Arc<str>,
    /// Where an addressed message stands with its recipient.
    pub delivery: Option<DeliveryLine>,
    /// Its files, as links that download them (an image is never shown
    /// inline: its bytes are another person's).
    pub files: Vec<FileLink>,
}

/// A file of a message, as a link.
pub struct FileLink {
    pub href: String,
    pub name: String,
    /// Its type and size, e.g. "image/png, 12 KB".
    pub detail: String,
}

/// An addressed message's delivery, as the page words it. `static/live.js`
/// words the same states alike when they change while the page is open.
pub struct DeliveryLine {
    /// `waiting`, `pushed`, `read`, `answered` or `acked`: the CSS class.
    pub state: &'static str,
    pub label: String,
}

impl DeliveryLine {
    fn new(delivery: &Delivery, to: &str) -> DeliveryLine {
        let state = delivery.state();
        let label = match state {
            DeliveryState::Waiting => "waiting".to_owned(),
            DeliveryState::Pushed if delivery.pushes_stopped() => format!(
                "shown to {to}'s agent {} times, not taken up: waits for its inbox check",
                delivery.offers
            ),
            DeliveryState::Pushed => format!(
                "shown to {to}'s agent{}",
                delivery.via.map_or("", how_shown)
            ),
            DeliveryState::Read => "read".to_owned(),
            DeliveryState::Answered => "answered".to_owned(),
            DeliveryState::Acked => match &delivery.ack {
                Some(Ack {
                    result,
                    note: Some(note),
                    ..
                }) => format!("acked: {} — {note}", result.as_str()),
                Some(ack) => format!("acked: {}", ack.result.as_str()),
                None => "acked".to_owned(),
            },
        };
        // What is still owed, after where it stands.
        let owed = match (delivery.is_owed(), delivery.overdue_at) {
            (false, _) => String::new(),
            (true, None) => format!(" · {} expected", delivery.expects.as_str()),
            (true, Some(_)) => format!(" · {} overdue", delivery.expects.as_str()),
        };
        DeliveryLine {
            state: state.as_str(),
            label: label + &owed,
        }
    }
}

/// How a path showed a message, after "shown to Bob's agent".
fn how_shown(via: Via) -> &'static str {
    match via {
        Via::Channel => " as a channel event",
        Via::Wake => " by its hook",
        Via::Hook => " with their prompt",
        Via::Stream => " on its stream",
        Via::Inbox => "",
    }
}

impl MessageLine {
    /// `message` as a line of the page, with its body as `html`.
    pub fn new(message: &Message, names: &Names, html: Arc<str>) -> MessageLine {
        MessageLine {
            id: message.id.0,
            from_name: names.name(message.from.as_str()),
            from: message.from.to_string(),
            to: message.to.as_ref().map(|to| names.name(to.as_str())),
            kind: message.kind.clone(),
            kind_class: message
                .kind
                .chars()
                .filter(char::is_ascii_alphabetic)
                .map(|c| c.to_ascii_lowercase())
                .collect(),
            when: When::at(message.created_at),
            reply_to: message.reply_to.map(|r| r.0),
            html,
            delivery: match (&message.delivery, &message.to) {
                (Some(delivery), Some(to)) => {
                    Some(DeliveryLine::new(delivery, &names.name(to.as_str())))
                }
                _ => None,
            },
            files: message
                .attachments
                .iter()
                .map(|a| FileLink {
                    href: crate::wire::attachment_path(message.id.0, a.n),
                    name: a.name.clone(),
                    detail: format!("{}, {}", a.content_type, size_label(a.size)),
                })
                .collect(),
        }
    }
}

/// A size as people read it: bytes, KB or MB (of 1,024).
fn size_label(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{} KB", bytes.div_ceil(1024)),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

/// Where a message is on the page: its conversation, at its anchor.
pub fn link(message: &Message) -> String {
    crate::wire::page_link(message)
}

/// The first page of channels (or the one before `before`), with how many
/// messages `caller` has not read in each.
pub async fn channels_with_unread(
    relay: &Relay,
    caller: &Caller,
    before: Option<i64>,
) -> RelayResult<(Listing<ChannelSummary>, Vec<u64>)> {
    let listing = relay.channels(before.map(MessageId), None).await?;
    let places = listing
        .items
        .iter()
        .map(|c| Place::Channel(c.name.clone()))
        .collect();
    let unread = relay.unread(caller, places).await?;
    Ok((listing, unread))
}

/// The most HTML of message bodies one page or fragment carries. Past it,
/// the older messages are shortened to their start, and past that to a
/// link, each with where to read it whole: a page stays loadable, and
/// quick to build, however long what it shows is.
pub const PAGE_HTML: usize = 4 << 20;

/// How much of a shortened message is shown.
const SHORTENED_TO: usize = 1024;

/// The messages as the page shows them, the newest first to get their
/// share of [`PAGE_HTML`]. A body longer than what is left of it is not
/// rendered at all (its HTML would be at least about as long), nor is any
/// once the page's request has ended.
pub fn lines(messages: &[Message], names: &Names, rendering: &Rendering) -> Vec<MessageLine> {
    let mut left = PAGE_HTML;
    let mut lines: Vec<MessageLine> = messages
        .iter()
        .rev()
        .map(|message| {
            let html = if rendering.abandoned() {
                Arc::from("")
            } else if message.body.len() <= left {
                markdown::render(&visible(&message.body))
            } else {
                shortened(message, true).into()
            };
            let html = match html.len() <= left {
                true => html,
                false => shortened(message, false).into(),
            };
            left = left.saturating_sub(html.len());
            MessageLine::new(message, names, html)
        })
        .collect();
    lines.reverse();
    lines
}

/// A message too long for what is left of the page: its start as written
/// (when `with_start`), and where to read the whole of it.
fn shortened(message: &Message, with_start: bool) -> String {
    let start = match with_start {
        true => {
            let body = visible(&message.body);
            let mut end = body.len().min(SHORTENED_TO);
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            markdown::as_written(&body[..end])
        }
        false => String::new(),
    };
    format!(
        "{start}<p class=\"shortened\">Shortened: a page shows at most {} MiB of messages. The \
         whole message is at <a href=\"/api/messages/{id}\">/api/messages/{id}</a>.</p>",
        PAGE_HTML >> 20,
        id = message.id
    )
}

/// A body with invisible characters (zero-width spaces, bidirectional
/// controls) shown as marks like `[U+202E]`, so it cannot read differently
/// from what it holds.
pub fn visible(body: &str) -> String {
    if !body.contains(secrets::is_invisible) {
        return body.to_owned();
    }
    body.chars()
        .map(|c| {
            if secrets::is_invisible(c) {
                format!("[U+{:04X}]", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A channel in the sidebar.
pub struct ChannelLink {
    pub name: String,
    pub unread: String,
}

/// A teammate in the sidebar.
pub struct PersonLink {
    pub handle: String,
    pub name: String,
    pub status: String,
    pub last_seen: Option<When>,
    /// Their agent would get a message the moment it is sent.
    pub reachable: bool,
}

/// What every signed-in page shows around its content.
pub struct Frame {
    pub viewer_name: String,
    pub viewer: String,
    /// The viewer's own status line.
    pub status: String,
    /// The first page of channels and the viewer's unread count in each:
    /// the sidebar's, and the overview's too (read once for both).
    pub channel_page: (Listing<ChannelSummary>, Vec<u64>),
    pub people: Vec<PersonLink>,
    /// Signs this viewer's forms.
    pub csrf: String,
    pub names: Names,
    /// What was typed in the search box, if this is a search.
    pub query: String,
    /// The viewer's agents' approvals waiting for an answer ("" for none).
    pub approvals: String,
}

impl Frame {
    pub async fn of(relay: &Relay, caller: &Caller, csrf: String) -> RelayResult<Frame> {
        let peers = relay.peers().await?;
        let (listing, unread) = channels_with_unread(relay, caller, None).await?;
        let viewer = caller.account();
        let me = peers.iter().find(|p| p.handle.as_str() == viewer);
        let approvals = match caller.identity() {
            Identity::Person(_) => relay.approvals(caller, false).await?.len() as u64,
            Identity::Unbound => 0,
        };
        Ok(Frame {
            approvals: unread_label(approvals),
            viewer_name: me.map_or_else(|| viewer.clone(), |p| p.name.clone()),
            status: me.map(|p| p.status.clone()).unwrap_or_default(),
            viewer,
            channel_page: (listing, unread),
            people: peers
                .iter()
                .map(|p| PersonLink {
                    handle: p.handle.to_string(),
                    name: p.name.clone(),
                    status: p.status.clone(),
                    last_seen: p.last_seen_at.map(When::at),
                    reachable: p.reachable,
                })
                .collect(),
            names: Names::of(&peers),
            csrf,
            query: String::new(),
        })
    }

    /// The sidebar's channels.
    pub fn channels(&self) -> Vec<ChannelLink> {
        let (listing, unread) = &self.channel_page;
        listing
            .items
            .iter()
            .zip(unread)
            .map(|(c, unread)| ChannelLink {
                name: c.name.to_string(),
                unread: unread_label(*unread),
            })
            .collect()
    }

    /// "Alice and Bob", "Alice, Bob and Carol".
    pub fn people_named(&self, handles: &[Handle]) -> String {
        let names: Vec<String> = handles
            .iter()
            .map(|h| self.names.name(h.as_str()))
            .collect();
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        }
    }
}

/// A message that expects an answer and has none yet, as the overview
/// lists it for the signed-in person.
pub struct OwedLine {
    pub href: String,
    /// Its first line, as plain text.
    pub title: String,
    /// Whom it is from (owed by you) or to (owed to you).
    pub who: String,
    /// `reply` or `ack`.
    pub expects: &'static str,
    pub due: Option<When>,
    pub overdue: bool,
}

impl OwedLine {
    pub fn new(message: &Message, who: &Handle, names: &Names) -> OwedLine {
        let delivery = message.delivery.clone().unwrap_or_default();
        OwedLine {
            href: match &message.place {
                Place::Thread(id) => format!("/threads/{id}#m{}", message.id),
                Place::Channel(name) => format!("/channels/{name}#m{}", message.id),
            },
            title: super::markdown::title(&visible(&message.body), 100),
            who: names.name(who.as_str()),
            expects: delivery.expects.as_str(),
            due: delivery.due_at.map(When::at),
            overdue: delivery.overdue_at.is_some(),
        }
    }
}

/// A live claim, as the overview lists it.
pub struct ClaimLine {
    pub what: String,
    pub repo: String,
    pub holder: String,
    pub note: String,
    pub until: When,
}

impl ClaimLine {
    pub fn new(claim: &crate::model::Claim, names: &Names) -> ClaimLine {
        ClaimLine {
            what: claim.what.clone(),
            repo: claim.repo.clone(),
            holder: names.name(claim.holder.as_str()),
            note: claim.note.clone().unwrap_or_default(),
            until: When::at(claim.expires_at),
        }
    }
}
