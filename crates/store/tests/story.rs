//! The store's own story, told on SQLite and on PostgreSQL: each
//! repository's life cycle below the HTTP layer, so that the two dialects
//! are proven to agree where the queries are written, scope included.

use parley_domain::agent::{AgentStatus, PatternType, TriggerEvent};
use parley_domain::channel::{ChannelStatus, ChannelType};
use parley_domain::contact::Identity;
use parley_domain::conversation::{Author, AuthorType, ConversationKind, Direction, MessageStatus};
use parley_domain::event::EventType;
use parley_domain::validation::Page;
use parley_domain::{Mode, Scope, Timestamp};
use parley_store::repo::agents::{self, AgentFields, AgentFilter};
use parley_store::repo::channels::{self, ChannelFields};
use parley_store::repo::contacts::{self, AddressColumn, ContactFields};
use parley_store::repo::conversations::{self, NewConversation, NewMessage};
use parley_store::repo::idempotency::{self, Claim};
use parley_store::repo::knowledge::{self, NewDocument, NewPassage};
use parley_store::repo::triggers::{self, TriggerFields};
use parley_store::repo::{events, versions, webhooks, workspaces};
use parley_store::testing::TestDatabase;
use parley_store::{Db, DbOptions};
use serde_json::json;

parley_store::on_both_backends!(
    agents_and_triggers_stay_in_their_scope,
    idempotency_keys_claim_replay_and_release,
    events_fan_out_to_subscribed_endpoints,
    events_are_written_at_commit_and_undone_with_their_savepoint,
    routable_triggers_are_read_once_a_transaction_until_a_trigger_changes,
    a_lookahead_answers_what_is_missing_until_it_is_written,
    a_message_is_noted_on_its_conversation_as_it_is_stored,
    change_counters_move_once_at_commit_and_not_for_undone_work,
    knowledge_candidates_come_ranked_or_in_index_order_within_the_scope,
    a_transcript_segment_is_written_once_however_often_it_is_written
);

async fn open(url: &str) -> Db {
    let db = Db::connect(url, &DbOptions::default()).await.unwrap();
    db.migrate().await.unwrap();
    db
}

const PAGE: Page = Page { limit: 50, offset: 0 };

/// Two workspaces; the scopes a story uses, and two it must never see.
async fn scopes(db: &Db) -> (Scope, Scope, Scope) {
    let mut tx = db.begin().await.unwrap();
    let a = workspaces::insert(&mut tx, "A", false).await.unwrap();
    let b = workspaces::insert(&mut tx, "B", false).await.unwrap();
    tx.commit().await.unwrap();
    (Scope::new(a.id, Mode::Test), Scope::new(a.id, Mode::Live), Scope::new(b.id, Mode::Test))
}

fn agent(name: &str) -> AgentFields {
    AgentFields {
        name: name.to_owned(),
        slug: name.to_lowercase(),
        description: Some("Answers the phone".into()),
        text_engine: "builtin".into(),
        status: AgentStatus::Active,
        priority: 0,
        is_template: false,
        system_prompt: "Be brief.".into(),
        first_message: None,
        language: "en".into(),
        speech: Default::default(),
        prompt_block_ids: vec![],
        knowledge_collection_ids: vec![],
        handoff: Default::default(),
        metadata: Default::default(),
        model: None,
        tools: vec![],
        debounce_ms: None,
        secrets: Default::default(),
    }
}

async fn agents_and_triggers_stay_in_their_scope(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, live, theirs) = scopes(&db).await;
    let mut tx = db.begin().await.unwrap();
    let ava = agents::insert(&mut tx, mine, &agent("Ava")).await.unwrap().unwrap();
    agents::insert(&mut tx, mine, &agent("Bob")).await.unwrap().unwrap();
    // The slug is unique per scope, not across scopes.
    assert!(agents::insert(&mut tx, live, &agent("Ava")).await.unwrap().is_some());
    tx.commit().await.unwrap();

    let mut c = db.read().await.unwrap();
    assert_eq!(agents::get(&mut c, mine, ava.id, false).await.unwrap().unwrap().name, "Ava");
    for other in [live, theirs] {
        assert!(agents::get(&mut c, other, ava.id, false).await.unwrap().is_none(), "{other:?} sees agent {}", ava.id);
    }
    let filter = AgentFilter { q: Some("av".into()), ..Default::default() };
    let (found, total) = agents::list(&mut c, mine, &filter, PAGE).await.unwrap();
    assert_eq!((found.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), total), (vec!["Ava"], 1));
    drop(c);

    let mut tx = db.begin().await.unwrap();
    let mut paused = agent("Ava");
    paused.status = AgentStatus::Paused;
    let updated = agents::update(&mut tx, mine, ava.id, &paused).await.unwrap().unwrap();
    assert_eq!(updated.status, AgentStatus::Paused);
    assert!(agents::update(&mut tx, theirs, ava.id, &paused).await.unwrap().is_none());
    let fields = TriggerFields {
        event: TriggerEvent::MessageReceived,
        channel: "*".into(),
        kind: None,
        pattern: Some("refund".into()),
        pattern_type: PatternType::Keyword,
        enabled: true,
    };
    let trigger = triggers::insert(&mut tx, mine, ava.id, &fields).await.unwrap();
    let mut off = fields.clone();
    off.enabled = false;
    assert!(!triggers::update(&mut tx, mine, ava.id, trigger.id, &off).await.unwrap().unwrap().enabled);
    assert!(triggers::get(&mut tx, theirs, ava.id, trigger.id).await.unwrap().is_none());
    assert!(!triggers::delete(&mut tx, live, ava.id, trigger.id).await.unwrap());
    assert_eq!(triggers::list(&mut tx, mine, ava.id, PAGE).await.unwrap().1, 1);
    assert!(triggers::delete(&mut tx, mine, ava.id, trigger.id).await.unwrap());
    tx.commit().await.unwrap();

    // A stored value outside its enum is an error, never a silent default.
    let mut tx = db.begin().await.unwrap();
    parley_store::execute!(&mut tx, sqlx::query("UPDATE agents SET status = 'sleeping' WHERE id = $1").bind(ava.id))
        .unwrap();
    assert!(agents::get(&mut tx, mine, ava.id, false).await.is_err());
}

async fn idempotency_keys_claim_replay_and_release(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, live, _) = scopes(&db).await;
    let mut tx = db.begin().await.unwrap();
    assert_eq!(idempotency::claim(&mut tx, mine, "k", "fp", 60).await.unwrap(), Claim::Acquired);
    assert_eq!(idempotency::claim(&mut tx, mine, "k", "fp", 60).await.unwrap(), Claim::InProgress);
    assert_eq!(idempotency::claim(&mut tx, mine, "k", "other", 60).await.unwrap(), Claim::FingerprintMismatch);
    // Keys belong to a scope.
    assert_eq!(idempotency::claim(&mut tx, live, "k", "other", 60).await.unwrap(), Claim::Acquired);
    idempotency::complete(&mut tx, mine, "k", 201, "{\"id\":1}").await.unwrap();
    assert_eq!(
        idempotency::claim(&mut tx, mine, "k", "fp", 60).await.unwrap(),
        Claim::Replay { status: 201, body: "{\"id\":1}".into() }
    );
    // A released key runs again; an expired claim is taken over.
    idempotency::release(&mut tx, live, "k").await.unwrap();
    assert_eq!(idempotency::claim(&mut tx, live, "k", "fp", 60).await.unwrap(), Claim::Acquired);
    assert_eq!(idempotency::claim(&mut tx, mine, "lapsed", "fp", -1).await.unwrap(), Claim::Acquired);
    assert_eq!(idempotency::claim(&mut tx, mine, "lapsed", "fp", 60).await.unwrap(), Claim::Acquired);
    tx.commit().await.unwrap();
}

async fn events_fan_out_to_subscribed_endpoints(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, _, theirs) = scopes(&db).await;
    let mut tx = db.begin().await.unwrap();
    let exact = webhooks::insert_endpoint(&mut tx, mine, "https://a.example/h", &["agent.updated".into()], None, "s")
        .await
        .unwrap();
    let all = webhooks::insert_endpoint(&mut tx, mine, "https://b.example/h", &["*".into()], None, "s").await.unwrap();
    let other = webhooks::insert_endpoint(&mut tx, mine, "https://c.example/h", &["contact.created".into()], None, "s")
        .await
        .unwrap();
    let elsewhere =
        webhooks::insert_endpoint(&mut tx, theirs, "https://d.example/h", &["*".into()], None, "s").await.unwrap();
    let event = events::append(&mut tx, mine, EventType::AgentUpdated, json!({"id": 7})).await.unwrap();
    tx.commit().await.unwrap();

    let mut c = db.read().await.unwrap();
    for (endpoint, expected) in [(exact.id, 1), (all.id, 1), (other.id, 0), (elsewhere.id, 0)] {
        let due = webhooks::due_deliveries(&mut c, endpoint, 10).await.unwrap();
        assert_eq!(due.len(), expected, "endpoint {endpoint}");
        if let Some(d) = due.first() {
            assert_eq!(
                (d.event_id.as_str(), d.event_type.as_str(), &d.data.0),
                (event.id.as_str(), "agent.updated", &json!({"id": 7}))
            );
        }
    }
    let due = webhooks::due_deliveries(&mut c, exact.id, 10).await.unwrap();
    drop(c);
    let outcome = webhooks::AttemptOutcome {
        delivery_id: due[0].id,
        event_id: due[0].event_id.clone(),
        event_type: due[0].event_type.clone(),
        attempt: 1,
        status_code: Some(200),
        error: None,
        duration_ms: 3,
        response_body_excerpt: Some("ok".into()),
        at: Timestamp::now(),
        next_attempt_at: None,
        succeeded: true,
    };
    let mut tx = db.begin().await.unwrap();
    webhooks::record_attempts(&mut tx, &exact, &[outcome], None).await.unwrap();
    tx.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    assert!(webhooks::due_deliveries(&mut c, exact.id, 10).await.unwrap().is_empty());
    assert_eq!(webhooks::list_attempts(&mut c, mine, exact.id, PAGE).await.unwrap().1, 1);
    assert_eq!(webhooks::list_attempts(&mut c, theirs, exact.id, PAGE).await.unwrap().1, 0);
    drop(c);

    // One transaction writing events in two workspaces (a group commit's)
    // queues each for its own workspace's subscribers only.
    let mut tx = db.begin().await.unwrap();
    let in_mine = events::append(&mut tx, mine, EventType::ContactCreated, json!({"id": 1})).await.unwrap();
    let in_theirs = events::append(&mut tx, theirs, EventType::ContactCreated, json!({"id": 2})).await.unwrap();
    tx.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    for (endpoint, expected) in [
        (exact.id, vec![]),
        (all.id, vec![event.id.clone(), in_mine.id.clone()]),
        (other.id, vec![in_mine.id.clone()]),
        (elsewhere.id, vec![in_theirs.id.clone()]),
    ] {
        let due = webhooks::due_deliveries(&mut c, endpoint, 10).await.unwrap();
        let due: Vec<String> = due.into_iter().map(|d| d.event_id).collect();
        assert_eq!(due, expected, "endpoint {endpoint}");
    }
}

/// A transaction writes the events it appended when it commits, in order;
/// those appended after a savepoint it rolls back to are gone with the
/// rest of that work, and so are their deliveries. Without a commit, none.
async fn events_are_written_at_commit_and_undone_with_their_savepoint(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, _, _) = scopes(&db).await;
    let endpoint = catch_all_endpoint(&db, mine).await;

    let mut tx = db.begin().await.unwrap();
    let kept = events::append(&mut tx, mine, EventType::AgentCreated, json!({"n": 1})).await.unwrap();
    tx.savepoint("undone").await.unwrap();
    events::append(&mut tx, mine, EventType::AgentUpdated, json!({"n": 2})).await.unwrap();
    tx.rollback_to("undone").await.unwrap();
    tx.savepoint("kept").await.unwrap();
    let last = events::append(&mut tx, mine, EventType::AgentUpdated, json!({"n": 3})).await.unwrap();
    tx.release("kept").await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = db.begin().await.unwrap();
    events::append(&mut tx, mine, EventType::AgentUpdated, json!({"n": 4})).await.unwrap();
    drop(tx);

    let mut c = db.read().await.unwrap();
    let mut stored = events::list(&mut c, mine, None, 10).await.unwrap();
    stored.reverse();
    let data: Vec<_> = stored.iter().map(|e| (e.id.as_str(), e.data.clone())).collect();
    assert_eq!(data, vec![(kept.id.as_str(), json!({"n": 1})), (last.id.as_str(), json!({"n": 3}))]);
    let due = webhooks::due_deliveries(&mut c, endpoint.id, 10).await.unwrap();
    let delivered: Vec<_> = due.iter().map(|d| d.event_id.as_str()).collect();
    assert_eq!(delivered, vec![kept.id.as_str(), last.id.as_str()]);
}

/// Routing a burst reads the triggers once a transaction; a trigger or an
/// agent written in it is seen by the next routing at once.
async fn routable_triggers_are_read_once_a_transaction_until_a_trigger_changes(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, _, _) = scopes(&db).await;
    let fields = TriggerFields {
        event: TriggerEvent::MessageReceived,
        channel: "*".into(),
        kind: None,
        pattern: None,
        pattern_type: PatternType::Keyword,
        enabled: true,
    };
    let mut tx = db.begin().await.unwrap();
    let ava = agents::insert(&mut tx, mine, &agent("Ava")).await.unwrap().unwrap();
    assert!(triggers::routable(&mut tx, mine, TriggerEvent::MessageReceived).await.unwrap().is_empty());
    let first = triggers::insert(&mut tx, mine, ava.id, &fields).await.unwrap();
    let ids = |t: Vec<parley_domain::agent::Trigger>| t.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(triggers::routable(&mut tx, mine, TriggerEvent::MessageReceived).await.unwrap()), vec![first.id]);
    let mut paused = agent("Ava");
    paused.status = AgentStatus::Paused;
    agents::update(&mut tx, mine, ava.id, &paused).await.unwrap();
    assert!(triggers::routable(&mut tx, mine, TriggerEvent::MessageReceived).await.unwrap().is_empty());
    agents::update(&mut tx, mine, ava.id, &agent("Ava")).await.unwrap();
    let mut off = fields.clone();
    off.enabled = false;
    triggers::update(&mut tx, mine, ava.id, first.id, &off).await.unwrap();
    assert!(triggers::routable(&mut tx, mine, TriggerEvent::MessageReceived).await.unwrap().is_empty());
    triggers::update(&mut tx, mine, ava.id, first.id, &fields).await.unwrap();
    assert_eq!(ids(triggers::routable(&mut tx, mine, TriggerEvent::MessageReceived).await.unwrap()), vec![first.id]);
    triggers::delete(&mut tx, mine, ava.id, first.id).await.unwrap();
    assert!(triggers::routable(&mut tx, mine, TriggerEvent::MessageReceived).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}

/// An SMS channel of `scope`.
async fn sms_channel(tx: &mut parley_store::Tx, scope: Scope) -> i64 {
    let fields = ChannelFields {
        kind: ChannelType::Sms,
        name: "SMS".into(),
        public_id: format!("ch_{}_{}", scope.workspace_id, scope.livemode()),
        address: "+14155550100".into(),
        status: ChannelStatus::Active,
        config: Default::default(),
        secret_names: vec![],
        sealed_secrets: None,
        sealed_signing_secret: None,
        status_reason: None,
    };
    channels::insert(tx, scope, &fields).await.unwrap().id
}

fn conversation<'a>(channel_id: i64, channel_ref: &'a str) -> NewConversation<'a> {
    NewConversation {
        channel_id,
        channel: "sms",
        kind: ConversationKind::Direct,
        channel_ref,
        title: channel_ref,
        contact_id: None,
        sender_name: None,
        unverified_sender: false,
    }
}

fn message<'a>(
    conversation_id: i64,
    channel_id: i64,
    direction: Direction,
    text: &'a str,
    external_id: Option<&'a str>,
) -> NewMessage<'a> {
    static DETAILS: std::sync::LazyLock<parley_domain::conversation::MessageDetails> =
        std::sync::LazyLock::new(Default::default);
    NewMessage {
        conversation_id,
        channel_id,
        direction,
        author: Author { kind: AuthorType::Contact, id: None },
        text,
        status: MessageStatus::Received,
        external_id,
        attachments: &[],
        details: &DETAILS,
    }
}

/// Stores `m` (see `conversations::insert_message`).
async fn stored(tx: &mut parley_store::Tx, scope: Scope, m: NewMessage<'_>) -> parley_domain::conversation::Message {
    conversations::insert_message(tx, scope, &m).await.unwrap()
}

/// An endpoint of `scope` subscribed to every event.
async fn catch_all_endpoint(db: &Db, scope: Scope) -> webhooks::EndpointRow {
    let mut tx = db.begin().await.unwrap();
    let endpoint =
        webhooks::insert_endpoint(&mut tx, scope, "https://a.example/h", &["*".into()], None, "s").await.unwrap();
    tx.commit().await.unwrap();
    endpoint
}

fn sms(address: &str) -> Identity {
    Identity { channel: ChannelType::Sms, address: address.into(), unverified: false }
}

/// A group commit looks ahead for its batch: what it found missing is
/// answered without a statement, what exists is still read, and each row
/// written afterwards (in the same transaction) is found at once.
async fn a_lookahead_answers_what_is_missing_until_it_is_written(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, _, theirs) = scopes(&db).await;
    let (known, new) = ("+14155550001", "+14155550002");
    let mut tx = db.begin().await.unwrap();
    let channel = sms_channel(&mut tx, mine).await;
    let contact =
        ContactFields { display_name: "Known".into(), normalized_phone: Some(known.into()), ..Default::default() };
    let contact = contacts::insert(&mut tx, mine, &contact, &[sms(known)]).await.unwrap();
    let open = conversations::insert(&mut tx, mine, &conversation(channel, "sms:+14155550001")).await.unwrap();
    stored(&mut tx, mine, message(open.item.id, channel, Direction::Inbound, "Hi", Some("SM1"))).await;
    tx.commit().await.unwrap();

    let mut tx = db.begin().await.unwrap();
    conversations::look_ahead_inbound(&mut tx, mine, channel, &["SM1", "SM2"]).await.unwrap();
    conversations::look_ahead_open(&mut tx, mine, channel, &["sms:+14155550001", "sms:+14155550002"]).await.unwrap();
    contacts::look_ahead_addresses(&mut tx, mine, AddressColumn::Phone, &[known, new]).await.unwrap();
    contacts::look_ahead_identities(&mut tx, mine, &[sms(known), sms(new)]).await.unwrap();
    // What exists is found.
    let by_id = conversations::by_external_id(&mut tx, mine, channel, Direction::Inbound, "SM1").await.unwrap();
    assert_eq!(by_id.map(|m| m.conversation_id), Some(open.item.id));
    let found = conversations::find_open(&mut tx, mine, channel, "sms:+14155550001").await.unwrap();
    assert_eq!(found.map(|c| c.item.id), Some(open.item.id));
    assert_eq!(contacts::id_by_address(&mut tx, mine, AddressColumn::Phone, known).await.unwrap(), Some(contact.id));
    assert_eq!(contacts::id_by_identity(&mut tx, mine, &sms(known)).await.unwrap(), Some(contact.id));
    // What is missing is missing, until it is written.
    assert!(contacts::id_by_address(&mut tx, mine, AddressColumn::Phone, new).await.unwrap().is_none());
    let fields = ContactFields { display_name: "New".into(), normalized_phone: Some(new.into()), ..Default::default() };
    let created = contacts::insert(&mut tx, mine, &fields, &[]).await.unwrap();
    assert_eq!(contacts::id_by_address(&mut tx, mine, AddressColumn::Phone, new).await.unwrap(), Some(created.id));
    assert!(contacts::id_by_identity(&mut tx, mine, &sms(new)).await.unwrap().is_none());
    contacts::add_identity(&mut tx, mine, created.id, &sms(new)).await.unwrap();
    assert_eq!(contacts::id_by_identity(&mut tx, mine, &sms(new)).await.unwrap(), Some(created.id));
    assert!(conversations::find_open(&mut tx, mine, channel, "sms:+14155550002").await.unwrap().is_none());
    let opened = conversations::insert(&mut tx, mine, &conversation(channel, "sms:+14155550002")).await.unwrap();
    let found = conversations::find_open(&mut tx, mine, channel, "sms:+14155550002").await.unwrap();
    assert_eq!(found.map(|c| c.item.id), Some(opened.item.id));
    assert!(conversations::by_external_id(&mut tx, mine, channel, Direction::Inbound, "SM2").await.unwrap().is_none());
    stored(&mut tx, mine, message(opened.item.id, channel, Direction::Inbound, "Yo", Some("SM2"))).await;
    let by_id = conversations::by_external_id(&mut tx, mine, channel, Direction::Inbound, "SM2").await.unwrap();
    assert_eq!(by_id.map(|m| m.conversation_id), Some(opened.item.id));
    // A contact updated to a looked-for email is found by it.
    contacts::look_ahead_addresses(&mut tx, mine, AddressColumn::Email, &["ann@example.org"]).await.unwrap();
    let mut changed = fields.clone();
    changed.normalized_email = Some("ann@example.org".into());
    contacts::update(&mut tx, mine, created.id, &changed).await.unwrap();
    let by_email = contacts::id_by_address(&mut tx, mine, AddressColumn::Email, "ann@example.org").await.unwrap();
    assert_eq!(by_email, Some(created.id));
    // Another scope's lookahead says nothing about this one's rows.
    contacts::look_ahead_addresses(&mut tx, theirs, AddressColumn::Phone, &[known]).await.unwrap();
    assert_eq!(contacts::id_by_address(&mut tx, mine, AddressColumn::Phone, known).await.unwrap(), Some(contact.id));
    assert!(contacts::id_by_address(&mut tx, theirs, AddressColumn::Phone, known).await.unwrap().is_none());
    tx.commit().await.unwrap();
    // A contact is stored with all its identities (the first in the same trip).
    let mut tx = db.begin().await.unwrap();
    let two =
        [sms("+14155550006"), Identity { channel: ChannelType::Telegram, address: "4242".into(), unverified: false }];
    let fields = ContactFields { display_name: "Two".into(), ..Default::default() };
    let both = contacts::insert(&mut tx, mine, &fields, &two).await.unwrap();
    assert_eq!(both.identities, two);
    for identity in &two {
        assert_eq!(contacts::id_by_identity(&mut tx, mine, identity).await.unwrap(), Some(both.id));
    }
    tx.commit().await.unwrap();
    // Outside a transaction nothing is remembered.
    let mut c = db.read().await.unwrap();
    conversations::look_ahead_inbound(&mut c, mine, channel, &["SM2"]).await.unwrap();
    assert!(conversations::by_external_id(&mut c, mine, channel, Direction::Inbound, "SM2").await.unwrap().is_some());
}

/// Storing a message notes it on its conversation in the same trip: an
/// inbound one is unread and starts the contact's wait, an outbound one
/// ends it; both become the last message. A refused message notes nothing.
async fn a_message_is_noted_on_its_conversation_as_it_is_stored(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, _, _) = scopes(&db).await;
    let mut tx = db.begin().await.unwrap();
    let channel = sms_channel(&mut tx, mine).await;
    let id = conversations::insert(&mut tx, mine, &conversation(channel, "sms:+14155550003")).await.unwrap().item.id;
    let first = stored(&mut tx, mine, message(id, channel, Direction::Inbound, "Where is it?", Some("SM9"))).await;
    stored(&mut tx, mine, message(id, channel, Direction::Inbound, "Hello?", None)).await;
    tx.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    let noted = conversations::get(&mut c, mine, id).await.unwrap().unwrap();
    assert_eq!(noted.item.unread_count, 2);
    assert_eq!(noted.waiting_since, Some(first.created_at));
    assert_eq!(noted.item.last_message_preview.as_deref(), Some("Hello?"));
    drop(c);

    let mut tx = db.begin().await.unwrap();
    let refused =
        conversations::insert_message(&mut tx, mine, &message(id, channel, Direction::Inbound, "Again", Some("SM9")))
            .await;
    assert!(refused.is_err(), "a provider id is stored once");
    drop(tx);
    let mut tx = db.begin().await.unwrap();
    let reply = stored(&mut tx, mine, message(id, channel, Direction::Outbound, "On its way", None)).await;
    tx.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    let noted = conversations::get(&mut c, mine, id).await.unwrap().unwrap();
    assert_eq!(noted.item.unread_count, 2);
    assert_eq!(noted.waiting_since, None);
    assert_eq!(noted.item.last_message_ts, Some(reply.created_at));
    assert_eq!(noted.item.last_message_preview.as_deref(), Some("On its way"));
}

/// A transaction moves each change counter it touched once, at its
/// commit; work undone to a savepoint, or never committed, moves none.
async fn change_counters_move_once_at_commit_and_not_for_undone_work(database: TestDatabase) {
    let db = open(&database.url).await;
    let (mine, live, _) = scopes(&db).await;
    let version = |snapshot: &versions::Snapshot| snapshot.get(conversations::VERSION_KEY);
    let mut c = db.read().await.unwrap();
    let before = version(&versions::snapshot(&mut c, mine).await.unwrap());
    drop(c);

    let mut tx = db.begin().await.unwrap();
    let channel = sms_channel(&mut tx, mine).await;
    let id = conversations::insert(&mut tx, mine, &conversation(channel, "sms:+14155550004")).await.unwrap().item.id;
    stored(&mut tx, mine, message(id, channel, Direction::Inbound, "One", None)).await;
    tx.savepoint("undone").await.unwrap();
    versions::bump(&mut tx, live, conversations::VERSION_KEY).await.unwrap();
    tx.rollback_to("undone").await.unwrap();
    tx.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    assert_eq!(version(&versions::snapshot(&mut c, mine).await.unwrap()), before + 1);
    assert_eq!(version(&versions::snapshot(&mut c, live).await.unwrap()), 0);
    drop(c);

    let mut tx = db.begin().await.unwrap();
    stored(&mut tx, mine, message(id, channel, Direction::Inbound, "Two", None)).await;
    drop(tx);
    let mut c = db.read().await.unwrap();
    assert_eq!(version(&versions::snapshot(&mut c, mine).await.unwrap()), before + 1);
    drop(c);
    // Two scopes' counters, each once, in one commit.
    let mut w = db.begin().await.unwrap();
    versions::bump(&mut w, live, conversations::VERSION_KEY).await.unwrap();
    versions::bump(&mut w, mine, conversations::VERSION_KEY).await.unwrap();
    w.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    assert_eq!(version(&versions::snapshot(&mut c, mine).await.unwrap()), before + 2);
    assert_eq!(version(&versions::snapshot(&mut c, live).await.unwrap()), 1);
}

/// Candidates for a question: ranked by the index (the passage where the
/// word weighs most first), or, when a word is everywhere, the first the
/// index finds in id order; never another scope's passages. A collection's
/// size and version move with its documents.
async fn knowledge_candidates_come_ranked_or_in_index_order_within_the_scope(database: TestDatabase) {
    let db = open(&database.url).await;
    let (test, live, other) = scopes(&db).await;
    let mut tx = db.begin().await.unwrap();
    let mut add = async |scope: Scope, texts: &[&str]| {
        let collection = knowledge::insert_collection(&mut tx, scope, "Help", None).await.unwrap();
        let new = NewDocument {
            collection_id: collection.id,
            title: "FAQ",
            source: None,
            content_type: "text/plain",
            bytes: 1,
            storage_key: "k",
        };
        let document = knowledge::insert_document(&mut tx, scope, &new).await.unwrap();
        let passages: Vec<NewPassage> = texts
            .iter()
            .map(|t| NewPassage {
                text: (*t).to_owned(),
                terms: parley_domain::knowledge::index_words(t),
                words: t.split_whitespace().count() as i64,
            })
            .collect();
        assert!(knowledge::document_ready(&mut tx, scope, &document, &passages).await.unwrap());
        collection.id
    };
    let long = "We ship orders on weekdays and the courier collects parcels in the afternoon";
    let mine = add(test, &[long, "Ship ship ship", "Returns take two weeks"]).await;
    let theirs = add(other, &["Ship ship ship ship"]).await;
    let live_one = add(live, &["Ship today"]).await;
    tx.commit().await.unwrap();

    let mut c = db.read().await.unwrap();
    let word = vec!["ship".to_owned()];
    let ranked = knowledge::candidates(&mut c, test, &[mine, theirs, live_one], &word, 10, true).await.unwrap();
    assert_eq!(ranked.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(), ["Ship ship ship", long]);
    let in_order = knowledge::candidates(&mut c, test, &[mine, theirs, live_one], &word, 10, false).await.unwrap();
    assert_eq!(in_order.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(), [long, "Ship ship ship"]);
    let first = knowledge::candidates(&mut c, test, &[mine], &word, 1, false).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].title, "FAQ");

    let sizes = knowledge::sizes(&mut c, test, &[mine, theirs]).await.unwrap();
    assert_eq!(sizes.iter().map(|s| (s.id, s.passage_count)).collect::<Vec<_>>(), [(mine, 3)]);
    assert_eq!(sizes[0].word_count, 13 + 3 + 4);
}

/// Two transactions queue the first deliveries of one endpoint at once:
/// the endpoint still gets one drain job (two could serve it together and
/// deliver an event twice). The second waits for the first and finds its job.
#[tokio::test]
async fn concurrent_first_deliveries_of_an_endpoint_make_one_drain_on_postgres() {
    let database = TestDatabase::postgres().await;
    let db = open(&database.url).await;
    let (mine, _, _) = scopes(&db).await;
    let endpoint = catch_all_endpoint(&db, mine).await;
    let mut first = db.begin().await.unwrap();
    webhooks::enqueue(&mut first, mine, endpoint.id, "evt_1", "webhook.test").await.unwrap();
    let second = tokio::spawn({
        let db = db.clone();
        async move {
            let mut tx = db.begin().await.unwrap();
            webhooks::enqueue(&mut tx, mine, endpoint.id, "evt_2", "webhook.test").await.unwrap();
            tx.commit().await.unwrap();
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    first.commit().await.unwrap();
    second.await.unwrap();
    let mut c = db.read().await.unwrap();
    let drains = parley_store::repo::jobs::of_kind(&mut c, webhooks::DRAIN_KIND).await.unwrap();
    assert_eq!(drains.len(), 1, "{drains:?}");
}

/// On PostgreSQL a change counter is split over shard rows, so writers in
/// one workspace do not queue on it: while one transaction holds the row it
/// bumped (until its commit), another bumps the same counter and commits at
/// once; readers (the snapshot and an API key's authentication) sum both.
#[tokio::test]
async fn writers_in_one_workspace_bump_a_counter_without_waiting_on_each_other_on_postgres() {
    let database = TestDatabase::postgres().await;
    let db = open(&database.url).await;
    let (mine, _, _) = scopes(&db).await;
    let mut c = db.read().await.unwrap();
    let before = versions::snapshot(&mut c, mine).await.unwrap().get(agents::VERSION_KEY);
    drop(c);
    let mut first = db.begin().await.unwrap();
    versions::bump_all(&mut first, [(mine, agents::VERSION_KEY.to_owned())]).await.unwrap();
    let second = async {
        let mut tx = db.begin().await.unwrap();
        versions::bump(&mut tx, mine, agents::VERSION_KEY).await.unwrap();
        tx.commit().await.unwrap();
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), second)
        .await
        .expect("the second bump waited for the first transaction's commit");
    let mut c = db.read().await.unwrap();
    assert_eq!(versions::snapshot(&mut c, mine).await.unwrap().get(agents::VERSION_KEY), before + 1);
    drop(c);
    first.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    assert_eq!(versions::snapshot(&mut c, mine).await.unwrap().get(agents::VERSION_KEY), before + 2);
    // An API key of the scope reads the same sum with its authentication.
    let key = parley_store::repo::api_keys::NewApiKey {
        workspace_id: mine.workspace_id,
        mode: Mode::Test,
        name: "ci",
        key_hash: "hash-of-the-ci-key",
        hint: "ci",
        workspace_locked: false,
        created_by: None,
        expires_at: None,
    };
    parley_store::repo::api_keys::insert(&mut c, &key).await.unwrap();
    let auth = parley_store::repo::api_keys::find_for_auth(&mut c, key.key_hash).await.unwrap().unwrap();
    assert_eq!(auth.versions.get(agents::VERSION_KEY), before + 2);
}

/// On PostgreSQL another instance may open a conversation between a
/// lookahead and the write: the insert then fails, and once the work is
/// undone to its savepoint, the lookup that follows reads the winner's row
/// (the lookahead is forgotten with the work).
#[tokio::test]
async fn a_lookahead_is_forgotten_with_the_work_undone_to_a_savepoint_on_postgres() {
    let database = TestDatabase::postgres().await;
    let db = open(&database.url).await;
    let (mine, _, _) = scopes(&db).await;
    let mut tx = db.begin().await.unwrap();
    let channel = sms_channel(&mut tx, mine).await;
    tx.commit().await.unwrap();
    let channel_ref = "sms:+14155550005";

    let mut tx = db.begin().await.unwrap();
    conversations::look_ahead_open(&mut tx, mine, channel, &[channel_ref]).await.unwrap();
    let mut other = db.begin().await.unwrap();
    let winner = conversations::insert(&mut other, mine, &conversation(channel, channel_ref)).await.unwrap();
    other.commit().await.unwrap();
    assert!(conversations::find_open(&mut tx, mine, channel, channel_ref).await.unwrap().is_none());
    tx.savepoint("open").await.unwrap();
    let lost = conversations::insert(&mut tx, mine, &conversation(channel, channel_ref)).await;
    assert!(matches!(lost, Err(parley_store::StoreError::UniqueViolation)), "{lost:?}");
    tx.rollback_to("open").await.unwrap();
    let found = conversations::find_open(&mut tx, mine, channel, channel_ref).await.unwrap();
    assert_eq!(found.map(|c| c.item.id), Some(winner.item.id));
}

/// A call's progress is written again when the database went away before
/// its commit answered: a segment already there is not a conflict, and
/// not a second line.
async fn a_transcript_segment_is_written_once_however_often_it_is_written(database: TestDatabase) {
    use parley_domain::call::{CallDirection, Speaker, TranscriptSegment};
    use parley_store::repo::calls;
    let db = open(&database.url).await;
    let (mine, _, _) = scopes(&db).await;
    let mut tx = db.begin().await.unwrap();
    let ava = agents::insert(&mut tx, mine, &agent("Ava")).await.unwrap().unwrap();
    let none = serde_json::Map::new();
    let call = calls::insert(
        &mut tx,
        mine,
        &calls::NewCall {
            public_id: "call_1",
            agent_id: ava.id,
            contact_id: None,
            conversation_id: None,
            from: None,
            to: "+14155550100",
            first_message: None,
            variables: &none,
            max_duration_s: 60,
            record: false,
            metadata: &none,
            provider: "simulated",
            owner: "calls-test",
            direction: CallDirection::Outbound,
            channel_id: 1,
        },
    )
    .await
    .unwrap();
    let line = |text: &str| TranscriptSegment {
        index: 0,
        speaker: Speaker::Caller,
        text: text.into(),
        start_ms: 0,
        end_ms: 900,
        interrupted: false,
        words: Vec::new(),
        latency: None,
    };
    assert!(calls::add_segment(&mut tx, call.id, &line("Hello?")).await.unwrap());
    assert!(!calls::add_segment(&mut tx, call.id, &line("Hello?")).await.unwrap(), "already there");
    tx.commit().await.unwrap();
    let mut c = db.read().await.unwrap();
    let kept = calls::segments(&mut c, call.id).await.unwrap();
    assert_eq!(kept.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(), ["Hello?"]);
}
