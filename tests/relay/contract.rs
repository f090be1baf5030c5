//! The store's contract (`src/store/mod.rs`), the same tests over every
//! backend: each test below runs on SQLite and on PostgreSQL (`contract!`
//! makes one test of each per backend), against a fresh, empty store.

use crate::postgres::fresh_database;
use crosstalk::model::{
    Ack, AckResult, Attachment, Authorization, Channel, ClaimTarget, Claimed, DeliveryState,
    Expects, GrantTokens, Handle, MAX_OFFERS, MessageId, Millis, NewClaim, Place, Redeemed,
    Refreshed, RegisteredClient, SessionId, ThreadId, Token, TokenHash, Via, now_millis,
};
use crosstalk::store::{
    Conversation, NewMessage, Offer, PostgresStore, RecipientCheck, SqliteStore, Store, StoreError,
};
use std::any::Any;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A fresh store, and what keeps it alive (its temp dir).
type Fresh = (Arc<dyn Store>, Box<dyn Any + Send>);

async fn sqlite() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("relay.db")).unwrap();
    (Arc::new(store), Box::new(dir))
}

async fn postgres() -> Fresh {
    let url = fresh_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    (Arc::new(store), Box::new(()))
}

macro_rules! contract {
    ($($test:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread")]
            async fn $test() {
                let (store, _keep) = super::sqlite().await;
                super::$test(store).await
            })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread")]
            #[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
            async fn $test() {
                let (store, _keep) = super::postgres().await;
                super::$test(store).await
            })*
        }
    };
}

contract!(
    people_tokens_and_the_credentials_revision,
    presence_keeps_the_later_sighting,
    messages_threads_and_replies,
    ids_only_increase,
    channels_pages_and_summaries,
    a_claim_hands_each_message_out_once,
    the_ledger_leases_offers_and_answers,
    an_unconfirmed_message_was_offered_again_without_end,
    expired_messages_are_invisible_and_purged,
    unread_counts_follow_read_marks,
    search_finds_every_word_newest_first,
    keys_are_made_once,
    kept_bytes_are_replaced_whole,
    sessions_are_kept_bound_and_ended,
    oauth_codes_grants_and_refresh_tokens_are_used_once,
    a_refresh_replaces_the_grants_tokens_in_one_row_and_a_retry_within_the_grace_rotates_again,
    a_person_holds_at_most_the_grants_asked_for_and_the_least_recently_used_goes,
    what_a_message_expects_is_owed_until_answered_or_acknowledged,
    an_overdue_message_is_taken_once,
    claims_overlap_across_people_renew_and_end,
    files_are_kept_with_their_message_and_purged_with_it,
    messages_sent_at_once_are_each_stored_as_sent,
);

fn handle(name: &str) -> Handle {
    Handle::parse(name).unwrap()
}

fn far() -> Millis {
    now_millis() + 86_400_000
}

fn message(conversation: Conversation, from: &str, to: Option<&str>, body: &str) -> NewMessage {
    NewMessage {
        conversation,
        from: handle(from),
        to: to.map(handle),
        check_to: RecipientCheck::None,
        kind: "NOTE".into(),
        body: body.into(),
        reply_to: None,
        created_at: now_millis(),
        expires_at: far(),
        expects: crosstalk::model::Expects::Nothing,
        due_at: None,
        attachments: Vec::new(),
    }
}

fn channel(name: &str) -> Conversation {
    Conversation::Channel(Channel::parse(name).unwrap())
}

async fn people_tokens_and_the_credentials_revision(store: Arc<dyn Store>) {
    assert!(!store.has_people().await.unwrap());
    let start = store.credentials_revision().await.unwrap();
    let (alice, bob) = (Token::generate(), Token::generate());
    store
        .add_person(&handle("alice"), "Alice", alice.hash(), 10)
        .await
        .unwrap();
    store
        .add_person(&handle("bob"), "Bob", bob.hash(), 11)
        .await
        .unwrap();
    let taken = store
        .add_person(&handle("alice"), "Again", Token::generate().hash(), 12)
        .await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    assert!(store.has_people().await.unwrap());
    let moved = store.credentials_revision().await.unwrap();
    assert!(moved > start);

    let found = store.person_by_token(alice.hash()).await.unwrap().unwrap();
    assert_eq!(
        (found.handle.as_str(), found.name.as_str()),
        ("alice", "Alice")
    );
    let live: BTreeSet<String> = store
        .live_tokens()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, h)| h.to_string())
        .collect();
    assert_eq!(live, BTreeSet::from(["alice".into(), "bob".into()]));

    let rotated = Token::generate();
    store
        .rotate_token(&handle("alice"), rotated.hash())
        .await
        .unwrap();
    assert!(store.person_by_token(alice.hash()).await.unwrap().is_none());
    assert!(
        store
            .person_by_token(rotated.hash())
            .await
            .unwrap()
            .is_some()
    );
    store.revoke_person(&handle("bob"), 20).await.unwrap();
    assert!(store.person_by_token(bob.hash()).await.unwrap().is_none());
    for refused in [
        store.revoke_person(&handle("bob"), 21).await,
        store
            .rotate_token(&handle("bob"), Token::generate().hash())
            .await,
        store.revoke_person(&handle("nobody"), 21).await,
    ] {
        assert!(
            matches!(refused, Err(StoreError::NotFound(_))),
            "{refused:?}"
        );
    }
    assert!(store.credentials_revision().await.unwrap() > moved);
    let everyone: Vec<(String, Option<Millis>)> = store
        .people()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.handle.to_string(), p.revoked_at))
        .collect();
    assert_eq!(everyone, [("alice".into(), None), ("bob".into(), Some(20))]);
}

async fn presence_keeps_the_later_sighting(store: Arc<dyn Store>) {
    store
        .add_person(&handle("alice"), "Alice", Token::generate().hash(), 1)
        .await
        .unwrap();
    store
        .set_status(&handle("alice"), "reviewing", 5)
        .await
        .unwrap();
    store
        .record_seen(vec![(handle("alice"), 100), (handle("guest"), 50)])
        .await
        .unwrap();
    store
        .record_seen(vec![(handle("alice"), 90)])
        .await
        .unwrap();
    let mut presence: Vec<(String, String, Option<Millis>)> = store
        .presence()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.handle.to_string(), p.status, p.last_seen_at))
        .collect();
    presence.sort();
    assert_eq!(
        presence,
        [
            ("alice".into(), "reviewing".into(), Some(100)),
            ("guest".into(), String::new(), Some(50)),
        ]
    );
    // A handle that is nobody's, quiet since before 60, is forgotten.
    store.purge_expired(now_millis(), 60).await.unwrap();
    let left: Vec<String> = store
        .presence()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.handle.to_string())
        .collect();
    assert_eq!(left, ["alice"]);
}

async fn messages_threads_and_replies(store: Arc<dyn Store>) {
    // With nobody added, anyone may be written to (or_empty_store)…
    let mut checked = message(Conversation::NewThread, "alice", Some("bob"), "hi");
    checked.check_to = RecipientCheck::LivePerson {
        or_empty_store: true,
    };
    store.insert_message(checked.clone()).await.unwrap();
    // …but once someone is, only a live person.
    store
        .add_person(&handle("carol"), "Carol", Token::generate().hash(), 1)
        .await
        .unwrap();
    let refused = store.insert_message(checked).await;
    assert!(
        matches!(refused, Err(StoreError::NotFound(_))),
        "{refused:?}"
    );

    let opening = store
        .insert_message(message(
            Conversation::NewThread,
            "alice",
            Some("carol"),
            "which migration?",
        ))
        .await
        .unwrap();
    let thread = opening.place.thread().unwrap();
    let mut answer = message(Conversation::Thread(thread), "carol", Some("alice"), "0042");
    answer.reply_to = Some(opening.id);
    let answer = store.insert_message(answer).await.unwrap();
    assert_eq!(answer.place, Place::Thread(thread));
    assert!(answer.id > opening.id);
    let bodies: Vec<String> = store
        .thread(thread, MessageId(0), 500, now_millis())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.body)
        .collect();
    assert_eq!(bodies, ["which migration?", "0042"]);
    // A page after a cursor, the newest page, and past the end (the thread
    // exists: nothing, not NotFound).
    let after = store
        .thread(thread, opening.id, 500, now_millis())
        .await
        .unwrap();
    assert_eq!(ids(&after), [answer.id]);
    let first = store
        .thread(thread, MessageId(0), 1, now_millis())
        .await
        .unwrap();
    assert_eq!(ids(&first), [opening.id]);
    let newest = store.thread_recent(thread, 1, now_millis()).await.unwrap();
    assert_eq!(ids(&newest), [answer.id]);
    assert!(
        store
            .thread(thread, answer.id, 500, now_millis())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store
            .thread_recent(ThreadId(thread.0 + 1000), 1, now_millis())
            .await,
        Err(StoreError::NotFound(_))
    ));

    let unknown = store
        .thread(ThreadId(thread.0 + 1000), MessageId(0), 500, now_millis())
        .await;
    assert!(matches!(unknown, Err(StoreError::NotFound(_))));
    let nowhere = store
        .insert_message(message(
            Conversation::Thread(ThreadId(thread.0 + 1000)),
            "alice",
            None,
            "?",
        ))
        .await;
    assert!(matches!(nowhere, Err(StoreError::NotFound(_))));
    // A reply must be to a live message of the same conversation.
    let mut elsewhere = message(channel("ops"), "alice", None, "see above");
    elsewhere.reply_to = Some(opening.id);
    let elsewhere = store.insert_message(elsewhere).await;
    assert!(matches!(elsewhere, Err(StoreError::NotFound(_))));

    let summary = store
        .threads(now_millis(), None, 10)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.id == thread)
        .unwrap();
    assert_eq!(
        (
            summary.message_count,
            summary.opening.as_str(),
            summary.last_id
        ),
        (2, "which migration?", answer.id)
    );
    let people: Vec<&str> = summary.people.iter().map(Handle::as_str).collect();
    assert_eq!(people, ["alice", "carol"]);
}

async fn ids_only_increase(store: Arc<dyn Store>) {
    // Concurrent writers: every id is new, and each larger than any the
    // writer saw acknowledged before it sent.
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for n in 0..25 {
                    let conversation = if n % 2 == 0 {
                        channel("ops")
                    } else {
                        Conversation::NewThread
                    };
                    let body = format!("{w}/{n}");
                    ids.push(
                        store
                            .insert_message(message(conversation, "alice", None, &body))
                            .await
                            .unwrap()
                            .id,
                    );
                }
                ids
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    for writer in writers {
        let ids = writer.await.unwrap();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        all.extend(ids);
    }
    assert_eq!(all.len(), 200);
    // A channel read in pages after since_id sees every post once, in order.
    let mut seen = Vec::new();
    let mut since = MessageId(0);
    loop {
        let page = store
            .channel_messages(&Channel::parse("ops").unwrap(), since, 7, now_millis())
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        since = last.id;
        seen.extend(page.into_iter().map(|m| m.id));
    }
    assert_eq!(seen.len(), 8 * 13, "the even posts of each writer");
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
}

async fn channels_pages_and_summaries(store: Arc<dyn Store>) {
    for (name, posts) in [("one", 1), ("two", 2), ("three", 3)] {
        for n in 0..posts {
            store
                .insert_message(message(
                    channel(name),
                    "alice",
                    None,
                    &format!("{name} {n}"),
                ))
                .await
                .unwrap();
        }
    }
    let listed = store.channels(now_millis(), None, 2).await.unwrap();
    let names: Vec<(String, u64)> = listed
        .iter()
        .map(|c| (c.name.to_string(), c.message_count))
        .collect();
    assert_eq!(names, [("three".into(), 3), ("two".into(), 2)]);
    let rest = store
        .channels(now_millis(), Some(listed[1].last_id), 2)
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].name.as_str(), "one");

    let three = Channel::parse("three").unwrap();
    let recent: Vec<String> = store
        .channel_recent(&three, 2, now_millis())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.body)
        .collect();
    assert_eq!(recent, ["three 1", "three 2"]);
    let all = store
        .channel_messages(&three, MessageId(0), 10, now_millis())
        .await
        .unwrap();
    let after_first = store
        .channel_messages(&three, all[0].id, 10, now_millis())
        .await
        .unwrap();
    assert_eq!(after_first.len(), 2);
    assert_eq!(all[0].place.channel(), Some(&three));
}

async fn a_claim_hands_each_message_out_once(store: Arc<dyn Store>) {
    for n in 0..150 {
        store
            .insert_message(message(
                Conversation::NewThread,
                "alice",
                Some("bob"),
                &format!("question {n}"),
            ))
            .await
            .unwrap();
    }
    let claimers: Vec<_> = (0..6)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let claimed = store
                        .claim_inbox(&handle("bob"), now_millis(), 7)
                        .await
                        .unwrap();
                    if claimed.is_empty() {
                        return got;
                    }
                    assert!(
                        claimed.windows(2).all(|w| w[0].id < w[1].id),
                        "oldest first"
                    );
                    got.extend(claimed.into_iter().map(|m| m.id));
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for claimer in claimers {
        all.extend(claimer.await.unwrap());
    }
    let distinct: BTreeSet<MessageId> = all.iter().copied().collect();
    assert_eq!(
        (all.len(), distinct.len()),
        (150, 150),
        "each once, none lost"
    );
    // Claimed is read: nobody's inbox hands it out again.
    assert!(
        store
            .claim_inbox(&handle("bob"), now_millis(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let ledger = store
        .message(all[0], now_millis())
        .await
        .unwrap()
        .unwrap()
        .delivery
        .unwrap();
    assert_eq!(ledger.state(), DeliveryState::Read);
}

/// The delivery ledger: an offer leases, a running lease holds the message
/// from claims and other offers, a stream is never offered the same
/// message twice in a row, a release or an ended lease frees it, a read
/// confirms it, and a reply answers it.
async fn the_ledger_leases_offers_and_answers(store: Arc<dyn Store>) {
    let bob = handle("bob");
    let first = store
        .insert_message(message(Conversation::NewThread, "alice", Some("bob"), "q1"))
        .await
        .unwrap();
    let thread = first.place.thread().unwrap();
    let second = store
        .insert_message(message(
            Conversation::Thread(thread),
            "alice",
            Some("bob"),
            "q2",
        ))
        .await
        .unwrap();
    let state = |id: MessageId| {
        let store = store.clone();
        async move {
            let m = store.message(id, now_millis()).await.unwrap().unwrap();
            let d = m.delivery.clone().unwrap();
            (d.state(), d.offers)
        }
    };
    assert_eq!(state(first.id).await, (DeliveryState::Waiting, 0));
    let now = now_millis();
    let lease = |holder, now: Millis| Offer {
        holder,
        now,
        until: now + 10_000,
        via: if holder == 3 { Via::Wake } else { Via::Channel },
    };
    let offered = store.offer_inbox(&bob, lease(1, now), 1).await.unwrap();
    assert_eq!(ids(&offered), [first.id], "oldest first, as many as asked");
    assert_eq!(offered[0].delivery.clone().unwrap().pushed_at, Some(now));
    assert_eq!(offered[0].delivery.clone().unwrap().via, Some(Via::Channel));
    assert_eq!(state(first.id).await, (DeliveryState::Pushed, 1));
    // Leased: another stream and a claim get only the other message.
    let other = store.offer_inbox(&bob, lease(2, now), 10).await.unwrap();
    assert_eq!(ids(&other), [second.id]);
    assert!(store.claim_inbox(&bob, now, 10).await.unwrap().is_empty());
    assert_eq!(
        store.next_lease_end(&bob, now).await.unwrap(),
        Some(now + 10_000)
    );
    // Released by its stream: claimable at once; another's release is nothing.
    store
        .release_offers(&bob, 1, vec![second.id])
        .await
        .unwrap();
    assert!(store.claim_inbox(&bob, now, 10).await.unwrap().is_empty());
    store.release_offers(&bob, 1, vec![first.id]).await.unwrap();
    // Never twice in a row to the same stream; to another, as a re-offer.
    assert!(
        store
            .offer_inbox(&bob, lease(1, now), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let again = store.offer_inbox(&bob, lease(3, now), 10).await.unwrap();
    assert_eq!(ids(&again), [first.id]);
    assert_eq!(again[0].delivery.clone().unwrap().offers, 2);
    assert_eq!(
        again[0].delivery.clone().unwrap().via,
        Some(Via::Wake),
        "the latest path"
    );
    assert_eq!(
        again[0].delivery.clone().unwrap().pushed_at,
        Some(now),
        "the first push"
    );
    // Once a lease ends, anyone may take it.
    let later = now + 10_001;
    assert_eq!(store.next_lease_end(&bob, later).await.unwrap(), None);
    let claimed = store.claim_inbox(&bob, later, 10).await.unwrap();
    assert_eq!(ids(&claimed), [first.id, second.id]);
    assert_eq!(claimed[0].delivery.clone().unwrap().read_at, Some(later));
    assert_eq!(claimed[0].delivery.clone().unwrap().via, Some(Via::Inbox));
    assert_eq!(state(second.id).await.0, DeliveryState::Read);
    assert!(
        store
            .offer_inbox(&bob, lease(4, later), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A confirmation marks only what was unread, and only the reader's.
    let third = store
        .insert_message(message(
            Conversation::Thread(thread),
            "alice",
            Some("bob"),
            "q3",
        ))
        .await
        .unwrap();
    assert!(
        store
            .confirm_read(&handle("carol"), vec![third.id], later)
            .await
            .unwrap()
            .is_empty()
    );
    let confirmed = store
        .confirm_read(&bob, vec![first.id, third.id], later)
        .await
        .unwrap();
    assert_eq!(confirmed, [third.id]);
    // A reply in the thread answers what it holds for the replier that
    // was shown or read; one still waiting (unseen) goes on waiting.
    let unseen = store
        .insert_message(message(
            Conversation::Thread(thread),
            "alice",
            Some("bob"),
            "q4",
        ))
        .await
        .unwrap();
    let reply = store
        .insert_message(message(
            Conversation::Thread(thread),
            "bob",
            Some("alice"),
            "a",
        ))
        .await
        .unwrap();
    for id in [first.id, second.id, third.id] {
        let m = store.message(id, now_millis()).await.unwrap().unwrap();
        let d = m.delivery.clone().unwrap();
        assert_eq!(
            (d.state(), d.answered_at),
            (DeliveryState::Answered, Some(reply.created_at))
        );
    }
    assert_eq!(state(unseen.id).await, (DeliveryState::Waiting, 0));
    assert_eq!(
        state(reply.id).await,
        (DeliveryState::Waiting, 0),
        "the reply waits for alice"
    );
    // In a channel, a reply answers only what it replies to.
    let asked = store
        .insert_message(message(channel("ops"), "alice", Some("bob"), "c1"))
        .await
        .unwrap();
    let other_post = store
        .insert_message(message(channel("ops"), "alice", Some("bob"), "c2"))
        .await
        .unwrap();
    let mut answer = message(channel("ops"), "bob", None, "c-answer");
    answer.reply_to = Some(asked.id);
    store.insert_message(answer).await.unwrap();
    assert_eq!(state(asked.id).await.0, DeliveryState::Answered);
    assert_eq!(state(other_post.id).await.0, DeliveryState::Waiting);
    // Reads carry the ledger; an unaddressed message has none.
    let read = store
        .thread(thread, MessageId(0), 500, now_millis())
        .await
        .unwrap();
    assert!(read.iter().all(|m| m.delivery.is_some()));
    assert_eq!(read.len(), 5);
    let posts = store
        .channel_messages(
            &Channel::parse("ops").unwrap(),
            MessageId(0),
            10,
            now_millis(),
        )
        .await
        .unwrap();
    assert_eq!(
        posts
            .iter()
            .map(|m| m.delivery.is_some())
            .collect::<Vec<_>>(),
        [true, true, false]
    );
    assert!(
        store
            .message(MessageId(i64::MAX), now_millis())
            .await
            .unwrap()
            .is_none()
    );
}

/// Re-offers end: once a message was offered [`MAX_OFFERS`] times, no
/// stream is offered it again, however many ask and however long after;
/// the ledger says its pushes stopped (and when its last lease ends), the
/// escalation's scan still finds it, and a claim still takes it.
async fn an_unconfirmed_message_was_offered_again_without_end(store: Arc<dyn Store>) {
    let bob = handle("bob");
    let sent = store
        .insert_message(message(Conversation::NewThread, "alice", Some("bob"), "q"))
        .await
        .unwrap();
    const LEASE: Millis = 10_000;
    let start = now_millis();
    // Each offer to another stream, after the lease before it ended.
    let at = |n: u32| start + Millis::from(n) * (LEASE + 1);
    let offer = |holder: i64, now: Millis| Offer {
        holder,
        now,
        until: now + LEASE,
        via: Via::Channel,
    };
    for n in 0..MAX_OFFERS {
        let offered = store
            .offer_inbox(&bob, offer(i64::from(n) + 1, at(n)), 10)
            .await
            .unwrap();
        assert_eq!(ids(&offered), [sent.id], "offer {}", n + 1);
        let delivery = offered[0].delivery.clone().unwrap();
        assert_eq!(delivery.offers, n + 1);
        assert_eq!(delivery.pushes_stopped(), n + 1 == MAX_OFFERS);
    }
    let last_lease_end = at(MAX_OFFERS - 1) + LEASE;
    let ledger = store
        .message(sent.id, start)
        .await
        .unwrap()
        .unwrap()
        .delivery
        .unwrap();
    assert_eq!(
        (ledger.state(), ledger.offers, ledger.lease_until),
        (DeliveryState::Pushed, MAX_OFFERS, Some(last_lease_end))
    );
    assert!(ledger.pushes_stopped());
    assert!(
        !ledger.pushes_ended(last_lease_end - 1),
        "its last lease runs"
    );
    assert!(ledger.pushes_ended(last_lease_end));
    // No stream again: not a new one, not one offered it before, not later.
    let later = at(MAX_OFFERS + 5);
    for holder in [99, 1, 2] {
        assert!(
            store
                .offer_inbox(&bob, offer(holder, later), 10)
                .await
                .unwrap()
                .is_empty(),
            "offered again to {holder}"
        );
    }
    assert_eq!(store.next_lease_end(&bob, later).await.unwrap(), None);
    // It waits to be brought to bob, and for his inbox check.
    let unnotified = store.unnotified(MessageId(0), later, 10).await.unwrap();
    assert_eq!(ids(&unnotified), [sent.id]);
    assert!(unnotified[0].delivery.clone().unwrap().pushes_ended(later));
    let claimed = store.claim_inbox(&bob, later, 10).await.unwrap();
    assert_eq!(ids(&claimed), [sent.id]);
    let read = claimed[0].delivery.clone().unwrap();
    assert_eq!(
        (read.state(), read.offers, read.lease_until),
        (DeliveryState::Read, MAX_OFFERS, None)
    );
    assert!(!read.pushes_stopped(), "read: nothing stopped short of it");
}

fn ids(messages: &[crosstalk::model::Message]) -> Vec<MessageId> {
    messages.iter().map(|m| m.id).collect()
}

async fn expired_messages_are_invisible_and_purged(store: Arc<dyn Store>) {
    let now = now_millis();
    let soon = |conversation, to: Option<&str>, body: &str, expires_at| {
        let mut m = message(conversation, "alice", to, body);
        m.expires_at = expires_at;
        m
    };
    let kept = store
        .insert_message(soon(channel("ops"), None, "kept words", now + 3_600_000))
        .await
        .unwrap();
    let gone = store
        .insert_message(soon(channel("ops"), Some("bob"), "gone words", now + 1_000))
        .await
        .unwrap();
    let thread = store
        .insert_message(soon(
            Conversation::NewThread,
            Some("bob"),
            "gone thread",
            now + 1_000,
        ))
        .await
        .unwrap();
    let later = now + 2_000;
    let ops = Channel::parse("ops").unwrap();
    let bodies = |messages: Vec<crosstalk::model::Message>| -> Vec<String> {
        messages.into_iter().map(|m| m.body).collect()
    };
    assert_eq!(
        bodies(
            store
                .channel_messages(&ops, MessageId(0), 10, later)
                .await
                .unwrap()
        ),
        ["kept words"]
    );
    assert_eq!(
        bodies(store.channel_recent(&ops, 10, later).await.unwrap()),
        ["kept words"]
    );
    assert!(
        store
            .claim_inbox(&handle("bob"), later, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .thread(thread.place.thread().unwrap(), MessageId(0), 500, later)
            .await
            .is_err()
    );
    assert!(store.threads(later, None, 10).await.unwrap().is_empty());
    let found = store.search("words", None, 10, later).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].message.id, kept.id);

    assert_eq!(store.purge_expired(later, 0).await.unwrap(), 2);
    let summary = store.channels(later, None, 10).await.unwrap();
    assert_eq!((summary[0].message_count, summary[0].last_id), (1, kept.id));
    assert!(store.threads(now, None, 10).await.unwrap().is_empty());
    assert!(
        store
            .claim_inbox(&handle("bob"), now, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.purge_expired(later, 0).await.unwrap(), 0);
    // Ids never go back, even past purged messages.
    let next = store
        .insert_message(message(channel("ops"), "alice", None, "after"))
        .await
        .unwrap();
    assert!(next.id > gone.id.max(thread.id));
}

async fn unread_counts_follow_read_marks(store: Arc<dyn Store>) {
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(
            store
                .insert_message(message(channel("ops"), "alice", None, &format!("{n}")))
                .await
                .unwrap()
                .id,
        );
    }
    let thread = store
        .insert_message(message(Conversation::NewThread, "alice", Some("bob"), "q"))
        .await
        .unwrap();
    let ops = Place::Channel(Channel::parse("ops").unwrap());
    let conversations = vec![
        ops.clone(),
        Place::Thread(thread.place.thread().unwrap()),
        Place::Channel(Channel::parse("nowhere").unwrap()),
    ];
    let bob = handle("bob");
    assert_eq!(
        store.unread(&bob, conversations.clone(), 99).await.unwrap(),
        [5, 1, 0]
    );
    assert_eq!(
        store.unread(&bob, conversations.clone(), 3).await.unwrap(),
        [3, 1, 0],
        "counted up to the cap"
    );
    store.mark_read(&bob, &ops, ids[3]).await.unwrap();
    store.mark_read(&bob, &ops, ids[1]).await.unwrap();
    assert_eq!(
        store.unread(&bob, conversations, 99).await.unwrap(),
        [1, 1, 0],
        "never backwards"
    );
}

async fn search_finds_every_word_newest_first(store: Arc<dyn Store>) {
    for body in [
        "the deploy of billing failed",
        "Is billing back? <b>asking</b>",
        "lunch?",
        "billing plan: deploy friday",
    ] {
        store
            .insert_message(message(channel("ops"), "alice", None, body))
            .await
            .unwrap();
    }
    let search = |typed: &'static str, before: Option<MessageId>| {
        let store = store.clone();
        async move {
            store
                .search(typed, before, 10, now_millis())
                .await
                .unwrap()
                .into_iter()
                .map(|f| f.message.body)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        search("bill", None).await,
        [
            "billing plan: deploy friday",
            "Is billing back? <b>asking</b>",
            "the deploy of billing failed"
        ]
    );
    assert_eq!(
        search("Deploy billing", None).await,
        [
            "billing plan: deploy friday",
            "the deploy of billing failed"
        ]
    );
    let first = store
        .search("billing", None, 1, now_millis())
        .await
        .unwrap();
    assert_eq!(
        search("billing", Some(first[0].message.id)).await.len(),
        2,
        "a page after the cursor"
    );
    let excerpt = &first[0].excerpt;
    assert!(
        excerpt
            .iter()
            .any(|run| run.matched && run.text == "billing"),
        "{excerpt:?}"
    );
    // Nothing typed is query syntax.
    for odd in [
        "\"billing OR * NEAR(",
        "billing & ! |",
        "it's \\ :*",
        "' ''",
    ] {
        store.search(odd, None, 10, now_millis()).await.unwrap();
    }
    assert!(search(" - ? ", None).await.is_empty());
}

async fn keys_are_made_once(store: Arc<dyn Store>) {
    let page = store.key("page").await.unwrap();
    assert_eq!(page.len(), 32);
    assert_eq!(store.key("page").await.unwrap(), page);
    assert_ne!(store.key("other").await.unwrap(), page);
}

async fn kept_bytes_are_replaced_whole(store: Arc<dyn Store>) {
    assert_eq!(store.kept("acme/cert").await.unwrap(), None);
    store.keep("acme/cert", vec![1, 2, 3]).await.unwrap();
    store.keep("acme/cert", vec![0, 255]).await.unwrap();
    assert_eq!(store.kept("acme/cert").await.unwrap(), Some(vec![0, 255]));
    assert_eq!(store.kept("acme/other").await.unwrap(), None);
}

async fn sessions_are_kept_bound_and_ended(store: Arc<dyn Store>) {
    let token = Token::generate();
    store
        .add_person(&handle("alice"), "Alice", token.hash(), 1)
        .await
        .unwrap();
    store
        .save_session(&SessionId::new("s1"), "{\"v\":1}", 10)
        .await
        .unwrap();
    store
        .save_session(&SessionId::new("s2"), "{}", 10)
        .await
        .unwrap();
    store
        .save_session(&SessionId::new("s3"), "{}", 10)
        .await
        .unwrap();
    let kept = store.session(&SessionId::new("s1")).await.unwrap().unwrap();
    assert_eq!((kept.owner, kept.state.as_str()), (None, "{\"v\":1}"));
    store
        .bind_session(&SessionId::new("s1"), token.hash(), 20)
        .await
        .unwrap();
    store
        .bind_session(&SessionId::new("s3"), token.hash(), 20)
        .await
        .unwrap();
    let bound = store.session(&SessionId::new("s1")).await.unwrap().unwrap();
    assert_eq!((bound.owner, bound.last_used), (Some(token.hash()), 20));
    store
        .touch_sessions(vec![SessionId::new("s1"), SessionId::new("s2")], 40)
        .await
        .unwrap();
    store.forget_idle_sessions(30).await.unwrap();
    assert!(
        store
            .session(&SessionId::new("s3"))
            .await
            .unwrap()
            .is_none(),
        "idle"
    );
    store
        .end_sessions(vec![SessionId::new("s2")])
        .await
        .unwrap();
    assert!(
        store
            .session(&SessionId::new("s2"))
            .await
            .unwrap()
            .is_none(),
        "ended"
    );
    // Replacing the owner's token ends what it opened.
    store
        .rotate_token(&handle("alice"), Token::generate().hash())
        .await
        .unwrap();
    assert!(
        store
            .session(&SessionId::new("s1"))
            .await
            .unwrap()
            .is_none(),
        "rotated"
    );
}

/// A new grant's first tokens, its refresh token of a family of its own.
fn tokens(now: Millis) -> (Token, Token, GrantTokens) {
    tokens_in(now, TokenHash::of(&Token::new_refresh_family()))
}

/// Tokens whose refresh token is of `family` (the store sees its hash only):
/// what refreshing a grant of that family makes.
fn tokens_in(now: Millis, family: TokenHash) -> (Token, Token, GrantTokens) {
    let (access, refresh) = (Token::generate(), Token::generate());
    let hashes = GrantTokens {
        access: access.hash(),
        access_expires: now + 3_600_000,
        refresh: refresh.hash(),
        refresh_expires: now + 86_400_000,
        family,
    };
    (access, refresh, hashes)
}

/// The grace a refresh gives the token it replaces, here.
const GRACE: Millis = 30_000;

/// Codes are redeemed once (again, and the grant made from one ends);
/// refresh tokens rotate (a used one again, and the grant ends); a
/// grant's access tokens are live until it ends; a person's rotation ends
/// their grants; every change of tokens moves the credentials revision.
async fn oauth_codes_grants_and_refresh_tokens_are_used_once(store: Arc<dyn Store>) {
    let now = now_millis();
    store
        .add_person(&handle("bob"), "Bob", Token::generate().hash(), now)
        .await
        .unwrap();
    let client = RegisteredClient {
        client_id: "crosstalk-client-abc".into(),
        name: Some("Tester".into()),
        redirect_uris: vec!["http://127.0.0.1/cb".into(), "https://x.example/cb".into()],
        registered_at: now,
    };
    store.register_client(client.clone()).await.unwrap();
    assert_eq!(
        store
            .registered_client("crosstalk-client-abc")
            .await
            .unwrap(),
        Some(client)
    );
    assert_eq!(store.registered_client("other").await.unwrap(), None);

    let authorization = Authorization {
        handle: handle("bob"),
        client_id: "crosstalk-client-abc".into(),
        client_name: "Tester".into(),
        redirect_uri: "http://127.0.0.1:4000/cb".into(),
        challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
        resource: "http://127.0.0.1:1/mcp".into(),
        scope: "crosstalk".into(),
    };
    let code = Token::generate();
    store
        .add_code(code.hash(), authorization.clone(), now + 60_000)
        .await
        .unwrap();
    let expired = Token::generate();
    store
        .add_code(expired.hash(), authorization.clone(), now - 1)
        .await
        .unwrap();
    assert_eq!(
        store.redeem_code(expired.hash(), now).await.unwrap(),
        Redeemed::Unknown
    );
    assert_eq!(
        store.redeem_code(code.hash(), now).await.unwrap(),
        Redeemed::Fresh(authorization.clone())
    );
    let before = store.credentials_revision().await.unwrap();
    let (access, refresh, first) = tokens(now);
    let grant = store
        .open_grant(code.hash(), authorization.clone(), first, now, 20)
        .await
        .unwrap()
        .expect("a grant from a fresh code");
    assert!(store.credentials_revision().await.unwrap() > before);
    let live = store.live_grants(now).await.unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].handle, handle("bob"));
    assert!(
        live[0]
            .access
            .is_some_and(|(hash, _)| hash == access.hash())
    );
    assert_eq!(
        store.grants(&handle("bob")).await.unwrap(),
        vec![grant.clone()]
    );

    // A refresh by another client finds nothing; by its own, rotates.
    let (_, _, next) = tokens_in(now, first.family);
    assert_eq!(
        store
            .refresh_grant(refresh.hash(), "someone-else", next, now, now + GRACE)
            .await
            .unwrap(),
        Refreshed::Unknown
    );
    let (new_access, new_refresh, next) = tokens_in(now + 1, first.family);
    let before = store.credentials_revision().await.unwrap();
    let Refreshed::Rotated {
        grant: rotated,
        generation,
        revision,
    } = store
        .refresh_grant(
            refresh.hash(),
            "crosstalk-client-abc",
            next,
            now + 1,
            now + 1,
        )
        .await
        .unwrap()
    else {
        panic!("the refresh token did not rotate")
    };
    assert_eq!((rotated.id, rotated.used_at), (grant.id, now + 1));
    assert_eq!(generation, 1);
    assert_eq!(revision, before + 1, "a refresh moves the revision by one");
    assert_eq!(store.credentials_revision().await.unwrap(), revision);
    // The access token it replaced is gone at once.
    let live = store.live_grants(now + 1).await.unwrap();
    assert!(
        live[0]
            .access
            .is_some_and(|(hash, _)| hash == new_access.hash())
    );

    // The old refresh token again, past its grace (it ended as it was
    // replaced): the grant ends, with all its tokens.
    let (_, _, again) = tokens_in(now + 2, first.family);
    assert_eq!(
        store
            .refresh_grant(
                refresh.hash(),
                "crosstalk-client-abc",
                again,
                now + 2,
                now + 2
            )
            .await
            .unwrap(),
        Refreshed::Reused
    );
    assert!(store.live_grants(now + 2).await.unwrap().is_empty());
    assert!(store.grants(&handle("bob")).await.unwrap().is_empty());
    let (_, _, after) = tokens_in(now + 3, first.family);
    assert_eq!(
        store
            .refresh_grant(
                new_refresh.hash(),
                "crosstalk-client-abc",
                after,
                now + 3,
                now + 3
            )
            .await
            .unwrap(),
        Refreshed::Unknown
    );

    // A code made and redeemed once, as an exchange begins.
    let redeemed = |store: Arc<dyn Store>, authorization: Authorization| async move {
        let code = Token::generate();
        store
            .add_code(code.hash(), authorization, now + 60_000)
            .await
            .unwrap();
        assert!(matches!(
            store.redeem_code(code.hash(), now).await.unwrap(),
            Redeemed::Fresh(_)
        ));
        code
    };

    // A code presented again ends the grant made from it.
    let code = redeemed(store.clone(), authorization.clone()).await;
    let (_, _, first) = tokens(now);
    store
        .open_grant(code.hash(), authorization.clone(), first, now, 20)
        .await
        .unwrap();
    assert_eq!(store.live_grants(now).await.unwrap().len(), 1);
    assert_eq!(
        store.redeem_code(code.hash(), now).await.unwrap(),
        Redeemed::Reused
    );
    assert!(store.live_grants(now).await.unwrap().is_empty());

    // A code presented again before its grant is made (between the first
    // exchange's redemption and its grant): void, and no grant is made.
    let code = redeemed(store.clone(), authorization.clone()).await;
    assert_eq!(
        store.redeem_code(code.hash(), now).await.unwrap(),
        Redeemed::Reused
    );
    let (_, _, first) = tokens(now);
    assert_eq!(
        store
            .open_grant(code.hash(), authorization.clone(), first, now, 20)
            .await
            .unwrap(),
        None
    );
    assert!(store.live_grants(now).await.unwrap().is_empty());

    // Ending by token, by id (someone else's is not theirs to end), and
    // by rotating the person's token.
    let open = |store: Arc<dyn Store>, authorization: Authorization| async move {
        let code = redeemed(store.clone(), authorization.clone()).await;
        let (access, _, first) = tokens(now);
        let grant = store
            .open_grant(code.hash(), authorization, first, now, 20)
            .await
            .unwrap()
            .expect("a grant from a fresh code");
        (grant, access)
    };
    let (_, access) = open(store.clone(), authorization.clone()).await;
    assert!(store.end_grant_holding(access.hash()).await.unwrap());
    assert!(!store.end_grant_holding(access.hash()).await.unwrap());
    let (grant, _) = open(store.clone(), authorization.clone()).await;
    assert!(
        !store
            .end_grant(grant.id, Some(&handle("alice")))
            .await
            .unwrap()
    );
    assert!(
        store
            .end_grant(grant.id, Some(&handle("bob")))
            .await
            .unwrap()
    );
    open(store.clone(), authorization.clone()).await;
    store
        .rotate_token(&handle("bob"), Token::generate().hash())
        .await
        .unwrap();
    assert!(store.live_grants(now).await.unwrap().is_empty());

    // What expired is forgotten, and a registration no grant was made for.
    store.forget_oauth(now + 86_400_001, now + 1).await.unwrap();
    assert_eq!(
        store
            .registered_client("crosstalk-client-abc")
            .await
            .unwrap(),
        None
    );
}

/// A code for `authorization`, redeemed, and the grant made from it with
/// `tokens` (a person keeping at most `most`).
async fn granted(
    store: &Arc<dyn Store>,
    authorization: &Authorization,
    tokens: GrantTokens,
    now: Millis,
    most: u32,
) -> crosstalk::model::Grant {
    let code = Token::generate();
    store
        .add_code(code.hash(), authorization.clone(), now + 60_000)
        .await
        .unwrap();
    assert!(matches!(
        store.redeem_code(code.hash(), now).await.unwrap(),
        Redeemed::Fresh(_)
    ));
    store
        .open_grant(code.hash(), authorization.clone(), tokens, now, most)
        .await
        .unwrap()
        .expect("a grant from a fresh code")
}

fn bobs_authorization() -> Authorization {
    Authorization {
        handle: handle("bob"),
        client_id: "crosstalk-client-abc".into(),
        client_name: "Tester".into(),
        redirect_uri: "http://127.0.0.1:4000/cb".into(),
        challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
        resource: "http://127.0.0.1:1/mcp".into(),
        scope: "crosstalk".into(),
    }
}

/// A refresh rotates the grant in place (one generation more, the access
/// token it replaced gone); the refresh token it replaced, again within
/// the grace, is a retry that rotates again (superseding what it gave
/// moments ago), and from another client is unknown; a token of the
/// grant's from before the previous one ends the grant, though no used
/// token was kept.
async fn a_refresh_replaces_the_grants_tokens_in_one_row_and_a_retry_within_the_grace_rotates_again(
    store: Arc<dyn Store>,
) {
    let now = now_millis();
    let authorization = bobs_authorization();
    let (_, t0, first) = tokens(now);
    let grant = granted(&store, &authorization, first, now, 20).await;
    let family = first.family;
    let client = "crosstalk-client-abc";
    let rotate = |presented: TokenHash, at: Millis| {
        let store = store.clone();
        async move {
            let (access, refresh, next) = tokens_in(at, family);
            let refreshed = store
                .refresh_grant(presented, client, next, at, at + GRACE)
                .await
                .unwrap();
            (refreshed, access, refresh)
        }
    };
    let generation_of = |refreshed: &Refreshed| match refreshed {
        Refreshed::Rotated {
            grant: rotated,
            generation,
            ..
        } => {
            assert_eq!(rotated.id, grant.id);
            *generation
        }
        other => panic!("not rotated: {other:?}"),
    };
    let live_access = |at: Millis| {
        let store = store.clone();
        async move {
            let live = store.live_grants(at).await.unwrap();
            assert_eq!(live.len(), 1, "one row a grant");
            live[0].access.map(|(hash, _)| hash)
        }
    };

    let (refreshed, a1, t1) = rotate(t0.hash(), now + 1).await;
    assert_eq!(generation_of(&refreshed), 1);
    assert_eq!(live_access(now + 1).await, Some(a1.hash()));

    // The same refresh again, from another client: unknown, and nothing
    // ends. From its own, within the grace: a retry, rotated again.
    let (_, _, stray) = tokens_in(now + 2, family);
    assert_eq!(
        store
            .refresh_grant(t0.hash(), "someone-else", stray, now + 2, now + 2 + GRACE)
            .await
            .unwrap(),
        Refreshed::Unknown
    );
    let (refreshed, a2, t2) = rotate(t0.hash(), now + 2).await;
    assert_eq!(generation_of(&refreshed), 2);
    assert_eq!(
        live_access(now + 2).await,
        Some(a2.hash()),
        "the pair issued moments ago is superseded"
    );
    assert!(a1.hash() != a2.hash() && t1.hash() != t2.hash());

    // The current one rotates on; the grace now covers t2 alone.
    let (refreshed, a3, _t3) = rotate(t2.hash(), now + 3).await;
    assert_eq!(generation_of(&refreshed), 3);
    assert_eq!(live_access(now + 3).await, Some(a3.hash()));
    assert_eq!(store.grants(&handle("bob")).await.unwrap().len(), 1);

    // t0, from before the previous one: a copy. The grant ends.
    let (refreshed, _, _) = rotate(t0.hash(), now + 4).await;
    assert_eq!(refreshed, Refreshed::Reused);
    assert!(store.live_grants(now + 4).await.unwrap().is_empty());
    assert!(store.grants(&handle("bob")).await.unwrap().is_empty());

    // Past the grace, the previous one ends its grant too.
    let (_, t0, first) = tokens(now);
    let grant = granted(&store, &authorization, first, now, 20).await;
    let (_, _, next) = tokens_in(now + 1, first.family);
    let rotated = store
        .refresh_grant(t0.hash(), client, next, now + 1, now + 1 + GRACE)
        .await
        .unwrap();
    assert!(matches!(rotated, Refreshed::Rotated { .. }));
    let (_, _, late) = tokens_in(now + 2 + GRACE, first.family);
    assert_eq!(
        store
            .refresh_grant(
                t0.hash(),
                client,
                late,
                now + 2 + GRACE,
                now + 2 + 2 * GRACE
            )
            .await
            .unwrap(),
        Refreshed::Reused
    );
    assert!(!store.end_grant(grant.id, None).await.unwrap(), "ended");
}

/// Opening a grant past the most a person may hold ends their least
/// recently used (made or refreshed longest ago), and no one else's.
async fn a_person_holds_at_most_the_grants_asked_for_and_the_least_recently_used_goes(
    store: Arc<dyn Store>,
) {
    let now = now_millis();
    let authorization = bobs_authorization();
    let carols = Authorization {
        handle: handle("carol"),
        ..bobs_authorization()
    };
    let carol = granted(&store, &carols, tokens(now).2, now, 2).await;
    let (_, b_refresh, b_tokens) = tokens(now);
    let a = granted(&store, &authorization, tokens(now).2, now, 2).await;
    let b = granted(&store, &authorization, b_tokens, now + 1, 2).await;
    let c = granted(&store, &authorization, tokens(now + 2).2, now + 2, 2).await;
    let ids = |handle: Handle| {
        let store = store.clone();
        async move {
            let grants = store.grants(&handle).await.unwrap();
            grants.iter().map(|g| g.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(ids(handle("bob")).await, [c.id, b.id], "the oldest went");
    // b refreshed is used more recently than c: c goes next.
    let (_, _, next) = tokens_in(now + 3, b_tokens.family);
    assert!(matches!(
        store
            .refresh_grant(b_refresh.hash(), &b.client_id, next, now + 3, now + 3)
            .await
            .unwrap(),
        Refreshed::Rotated { .. }
    ));
    let d = granted(&store, &authorization, tokens(now + 4).2, now + 4, 2).await;
    assert_eq!(ids(handle("bob")).await, [d.id, b.id]);
    assert!(!store.end_grant(a.id, None).await.unwrap());
    assert_eq!(ids(handle("carol")).await, [carol.id], "another's stay");
}

fn expecting(
    from: &str,
    to: &str,
    body: &str,
    expects: Expects,
    due_at: Option<Millis>,
) -> NewMessage {
    NewMessage {
        kind: "QUESTION".into(),
        expects,
        due_at,
        ..message(Conversation::NewThread, from, Some(to), body)
    }
}

async fn what_a_message_expects_is_owed_until_answered_or_acknowledged(store: Arc<dyn Store>) {
    let now = now_millis();
    let question = store
        .insert_message(expecting(
            "alice",
            "bob",
            "which port?",
            Expects::Reply,
            Some(now + 60_000),
        ))
        .await
        .unwrap();
    let task = store
        .insert_message(expecting(
            "alice",
            "bob",
            "rotate the key",
            Expects::Ack,
            None,
        ))
        .await
        .unwrap();
    store
        .insert_message(message(
            Conversation::NewThread,
            "alice",
            Some("bob"),
            "fyi",
        ))
        .await
        .unwrap();
    let delivery = question.delivery.clone().unwrap();
    assert_eq!(
        (delivery.expects, delivery.due_at),
        (Expects::Reply, Some(now + 60_000))
    );
    let read = store.message(question.id, now).await.unwrap().unwrap();
    assert_eq!(read.delivery, question.delivery, "stored as sent");

    let ids = |messages: Vec<crosstalk::model::Message>| -> Vec<MessageId> {
        messages.iter().map(|m| m.id).collect()
    };
    let owed_by_bob = ids(store.owed_by(&handle("bob"), now, 500).await.unwrap());
    assert_eq!(
        owed_by_bob,
        [question.id, task.id],
        "the note expects nothing"
    );
    let owed_to_alice = ids(store.owed_to(&handle("alice"), now, 500).await.unwrap());
    assert_eq!(owed_to_alice, [question.id, task.id]);
    assert!(
        store
            .owed_by(&handle("alice"), now, 500)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .owed_to(&handle("bob"), now, 500)
            .await
            .unwrap()
            .is_empty()
    );

    // Only its recipient's acknowledgement is taken.
    let ack = Ack {
        result: AckResult::Blocked,
        note: Some("no access".into()),
        at: now,
    };
    assert!(
        !store
            .ack_message(&handle("carol"), task.id, ack.clone())
            .await
            .unwrap()
    );
    assert!(
        store
            .ack_message(&handle("bob"), task.id, ack.clone())
            .await
            .unwrap()
    );
    let acked = store
        .message(task.id, now)
        .await
        .unwrap()
        .unwrap()
        .delivery
        .unwrap();
    assert_eq!(acked.ack, Some(ack));
    assert_eq!(acked.state(), DeliveryState::Acked);
    assert_eq!(acked.read_at, Some(now), "an acknowledgement reads it");
    // A later one replaces it.
    let done = Ack {
        result: AckResult::Done,
        note: None,
        at: now + 1,
    };
    assert!(
        store
            .ack_message(&handle("bob"), task.id, done.clone())
            .await
            .unwrap()
    );
    let acked = store
        .message(task.id, now)
        .await
        .unwrap()
        .unwrap()
        .delivery
        .unwrap();
    assert_eq!(acked.ack, Some(done));

    // An answer in the thread settles the question (once bob has it).
    store.claim_inbox(&handle("bob"), now, 10).await.unwrap();
    let thread = question.place.thread().unwrap();
    store
        .insert_message(message(
            Conversation::Thread(thread),
            "bob",
            Some("alice"),
            "8080",
        ))
        .await
        .unwrap();
    assert!(
        store
            .owed_by(&handle("bob"), now, 500)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .owed_to(&handle("alice"), now, 500)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn an_overdue_message_is_taken_once(store: Arc<dyn Store>) {
    let now = now_millis();
    let due = store
        .insert_message(expecting(
            "alice",
            "bob",
            "by noon?",
            Expects::Reply,
            Some(now - 1),
        ))
        .await
        .unwrap();
    let later = store
        .insert_message(expecting(
            "alice",
            "bob",
            "by tomorrow?",
            Expects::Reply,
            Some(now + 60_000),
        ))
        .await
        .unwrap();
    let acked = store
        .insert_message(expecting(
            "alice",
            "bob",
            "and this?",
            Expects::Ack,
            Some(now - 1),
        ))
        .await
        .unwrap();
    let ack = Ack {
        result: AckResult::Done,
        note: None,
        at: now,
    };
    store
        .ack_message(&handle("bob"), acked.id, ack)
        .await
        .unwrap();

    let taken = store.take_overdue(now, 100).await.unwrap();
    assert_eq!(
        taken.iter().map(|m| m.id).collect::<Vec<_>>(),
        [due.id],
        "not the acknowledged one, nor one not due"
    );
    assert_eq!(taken[0].delivery.clone().unwrap().overdue_at, Some(now));
    assert!(
        store.take_overdue(now + 1, 100).await.unwrap().is_empty(),
        "once"
    );
    // Still owed: it stays in what is open.
    let owed = store.owed_by(&handle("bob"), now, 500).await.unwrap();
    assert!(owed.iter().any(|m| m.id == due.id));
    let taken = store.take_overdue(now + 60_000, 100).await.unwrap();
    assert_eq!(taken.iter().map(|m| m.id).collect::<Vec<_>>(), [later.id]);
}

fn new_claim(holder: &str, what: &str, repo: &str, until: Millis) -> NewClaim {
    NewClaim {
        what: what.into(),
        target: ClaimTarget::parse(what).unwrap(),
        repo: repo.into(),
        holder: handle(holder),
        note: None,
        expires_at: until,
    }
}

async fn claims_overlap_across_people_renew_and_end(store: Arc<dyn Store>) {
    let now = now_millis();
    let repo = "github.com/org/app";
    let Claimed::Made(alices) = store
        .claim(new_claim("alice", "src/store/**", repo, now + 60_000), now)
        .await
        .unwrap()
    else {
        panic!("the first claim is made");
    };
    assert_eq!(
        (alices.holder.as_str(), alices.what.as_str()),
        ("alice", "src/store/**")
    );

    // Another person's overlapping claim is refused, naming alice's.
    let taken = store
        .claim(new_claim("bob", "src/**/mod.rs", repo, now + 60_000), now)
        .await
        .unwrap();
    assert_eq!(taken, Claimed::Taken(alices.clone()));
    // Not in another repository, nor on other files, nor a branch.
    for (what, in_repo) in [
        ("src/**/mod.rs", "github.com/org/other"),
        ("docs/**", repo),
        ("branch:main", repo),
    ] {
        let made = store
            .claim(new_claim("bob", what, in_repo, now + 60_000), now)
            .await
            .unwrap();
        assert!(
            matches!(made, Claimed::Made(_)),
            "{what} in {in_repo}: {made:?}"
        );
    }
    // Her own overlapping claims never conflict; the same `what` renews.
    let own = store
        .claim(
            new_claim("alice", "src/store/sqlite/**", repo, now + 60_000),
            now,
        )
        .await
        .unwrap();
    assert!(matches!(own, Claimed::Made(_)));
    let mut renewal = new_claim("alice", "src/store/**", repo, now + 120_000);
    renewal.note = Some("the migration".into());
    let Claimed::Made(renewed) = store.claim(renewal, now).await.unwrap() else {
        panic!("renewed");
    };
    assert_eq!(
        (renewed.id, renewed.expires_at, renewed.note.as_deref()),
        (alices.id, now + 120_000, Some("the migration"))
    );
    assert_eq!(store.claims(Some(repo), now).await.unwrap().len(), 4);
    assert_eq!(store.claims(None, now).await.unwrap().len(), 5);

    // Only the holder releases; an ended claim is gone from every read.
    assert!(
        !store
            .release_claim(alices.id, &handle("bob"))
            .await
            .unwrap()
    );
    assert!(
        store
            .release_claim(alices.id, &handle("alice"))
            .await
            .unwrap()
    );
    assert!(store.claim_by_id(alices.id, now).await.unwrap().is_none());
    let short = store
        .claim(new_claim("carol", "README.md", repo, now + 10), now)
        .await
        .unwrap();
    let Claimed::Made(short) = short else {
        panic!("made")
    };
    assert!(
        store
            .claim_by_id(short.id, now + 10)
            .await
            .unwrap()
            .is_none(),
        "ended"
    );
    let after = store
        .claim(new_claim("bob", "README.md", repo, now + 60_000), now + 10)
        .await
        .unwrap();
    assert!(
        matches!(after, Claimed::Made(_)),
        "an ended claim is in nobody's way"
    );
    assert_eq!(store.forget_claims(now + 10).await.unwrap(), 1);
}

async fn files_are_kept_with_their_message_and_purged_with_it(store: Arc<dyn Store>) {
    let now = now_millis();
    let file = |n: u32, name: &str, bytes: &[u8]| {
        (
            Attachment {
                n,
                name: name.into(),
                content_type: "text/plain".into(),
                size: bytes.len() as u64,
            },
            bytes.to_vec(),
        )
    };
    let big: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    let mut new = message(channel("ops"), "alice", None, "two files");
    new.attachments = vec![file(1, "a.txt", b"first"), file(2, "b.bin", &big)];
    let stored = store.insert_message(new).await.unwrap();
    assert_eq!(stored.attachments.len(), 2);
    let read = store.message(stored.id, now).await.unwrap().unwrap();
    assert_eq!(
        read.attachments, stored.attachments,
        "listed on the message"
    );
    assert_eq!(read.attachments[1].size, 1 << 20);
    let bytes_of = |n: u32| {
        let store = store.clone();
        async move {
            store
                .attachment(stored.id, n, now)
                .await
                .unwrap()
                .map(|(_, bytes)| bytes)
        }
    };
    assert_eq!(bytes_of(1).await.as_deref(), Some(&b"first"[..]));
    assert_eq!(bytes_of(2).await, Some(big));
    assert_eq!(store.attachment(stored.id, 3, now).await.unwrap(), None);
    let plain = store
        .insert_message(message(channel("ops"), "alice", None, "none"))
        .await
        .unwrap();
    assert!(plain.attachments.is_empty());
    assert!(
        store
            .message(plain.id, now)
            .await
            .unwrap()
            .unwrap()
            .attachments
            .is_empty()
    );

    // Gone from every read once the message expires, and from the store
    // with its purge.
    let later = far() + 1;
    assert_eq!(store.attachment(stored.id, 1, later).await.unwrap(), None);
    store.purge_expired(later, later).await.unwrap();
    assert_eq!(store.attachment(stored.id, 1, 0).await.unwrap(), None);
}

/// Messages that come together (one group commit on PostgreSQL, whose
/// rows go in one statement) are each stored as sent, every kind at once:
/// channel posts with and without a recipient, a reply to a post, a file,
/// a reply in a thread, a new thread; and each channel counts its posts.
async fn messages_sent_at_once_are_each_stored_as_sent(store: Arc<dyn Store>) {
    let question = message(Conversation::NewThread, "alice", Some("bob"), "which port?");
    let thread = store.insert_message(question).await.unwrap();
    let thread_id = thread.place.thread().unwrap();
    let earlier = store
        .insert_message(message(channel("ops"), "carol", None, "deploying"))
        .await
        .unwrap();
    let mut sent: Vec<NewMessage> = (0..6)
        .map(|n| {
            let (place, to) = match n % 3 {
                0 => ("ops", Some("bob")),
                1 => ("dev", None),
                _ => ("ops", None),
            };
            message(channel(place), "alice", to, &format!("post {n}"))
        })
        .collect();
    let mut reply = message(channel("ops"), "dave", Some("carol"), "done deploying?");
    reply.reply_to = Some(earlier.id);
    reply.kind = "QUESTION".into();
    reply.expects = Expects::Reply;
    reply.due_at = Some(far());
    sent.push(reply);
    let mut with_file = message(channel("dev"), "bob", None, "the log");
    with_file.attachments = vec![(
        Attachment {
            n: 1,
            name: "log.txt".into(),
            content_type: "text/plain".into(),
            size: 4,
        },
        b"ok\n\n".to_vec(),
    )];
    sent.push(with_file);
    sent.push(message(
        Conversation::Thread(thread_id),
        "bob",
        Some("alice"),
        "8443",
    ));
    sent.push(message(
        Conversation::NewThread,
        "carol",
        Some("dave"),
        "lunch?",
    ));

    let stored: Vec<_> =
        futures::future::join_all(sent.iter().map(|m| store.insert_message(m.clone())))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    let now = now_millis();
    for (message, new) in stored.iter().zip(&sent) {
        assert_eq!(message.body, new.body);
        let read = store.message(message.id, now).await.unwrap();
        assert_eq!(read.as_ref(), Some(message), "{} as read back", new.body);
    }
    let ids: BTreeSet<MessageId> = stored.iter().map(|m| m.id).collect();
    assert_eq!(ids.len(), stored.len(), "each its own id");
    let file = store.attachment(stored[7].id, 1, now).await.unwrap();
    assert_eq!(file.map(|(_, bytes)| bytes), Some(b"ok\n\n".to_vec()));

    // Each channel counts its posts, the one before them included, and
    // names its latest.
    let mut counted: Vec<(String, u64, MessageId, Millis)> = store
        .channels(now, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.message_count,
                c.last_id,
                c.last_activity,
            )
        })
        .collect();
    counted.sort();
    let last = |name: &str| {
        let in_it = stored
            .iter()
            .filter(|m| m.place.channel().is_some_and(|c| c.as_str() == name));
        let last = in_it.max_by_key(|m| m.id).unwrap();
        (last.id, last.created_at)
    };
    let ((dev, dev_at), (ops, ops_at)) = (last("dev"), last("ops"));
    assert_eq!(
        counted,
        [
            ("dev".into(), 3, dev, dev_at),
            ("ops".into(), 6, ops, ops_at)
        ]
    );
}

/// The same on PostgreSQL on one thread, where the messages sent at once
/// are queued before its writer takes them: one batch, its rows one
/// statement, each channel counted once.
#[tokio::test]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn messages_sent_at_once_are_one_batch_on_postgres() {
    let (store, _keep) = postgres().await;
    messages_sent_at_once_are_each_stored_as_sent(store).await;
}

/// On PostgreSQL a group commit sends its `COMMIT` in one pipeline behind
/// its writes: a write that fails there fails every message of the batch
/// and keeps none of it (the `COMMIT` after it rolls back), and the next
/// batch is stored as ever, on a connection outside any transaction.
#[tokio::test]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn a_batch_with_a_failing_write_keeps_none_of_it_on_postgres() {
    let url = fresh_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let tables = crate::postgres::client(&url).await;
    tables
        .batch_execute(
            "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.body = 'boom' THEN RAISE EXCEPTION 'refused'; END IF; \
             RETURN NEW; END $$; \
             CREATE TRIGGER refuse_boom BEFORE INSERT ON messages \
             FOR EACH ROW EXECUTE FUNCTION refuse_boom();",
        )
        .await
        .unwrap();
    let count = async |sql: &str| -> i64 { tables.query_one(sql, &[]).await.unwrap().get(0) };

    // Sent in one poll, on this test's one thread: queued before the
    // writer takes them, so one batch.
    let outcomes = futures::future::join_all(
        ["one", "boom", "three"]
            .map(|body| store.insert_message(message(channel("ops"), "alice", Some("bob"), body))),
    )
    .await;
    assert!(outcomes.iter().all(Result::is_err), "{outcomes:?}");
    assert_eq!(count("SELECT count(*) FROM messages").await, 0);
    assert_eq!(count("SELECT count(*) FROM inbox").await, 0);
    assert_eq!(count("SELECT count(*) FROM channel_summaries").await, 0);

    let stored = store
        .insert_message(message(channel("ops"), "alice", None, "four"))
        .await
        .unwrap();
    let read = store.message(stored.id, now_millis()).await.unwrap();
    assert_eq!(read, Some(stored));
    let counted = store.channels(now_millis(), None, 10).await.unwrap();
    assert_eq!(counted.len(), 1);
    assert_eq!(counted[0].message_count, 1);
}
