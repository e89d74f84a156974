//! A demo in test mode (`POST /api/v1/demo`): what a newcomer needs to see
//! a living console in a minute — an agent that answers from a knowledge
//! collection, a webchat channel with a few visitors' chats it answers, and a
//! test call on the simulated line. Everything is made through the same
//! parsers and services the API uses, so the demo is what the API makes.

use parley_domain::Mode;
use parley_domain::Scope;
use parley_domain::ids::{AgentId, CollectionId, DocumentId};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::messaging::channels;
use crate::{ServiceError, ServiceResult, Services, agents, calls, knowledge};

/// The demo agent's name: a second demo is refused while it exists.
pub const AGENT_NAME: &str = "Ava (demo)";

const HELP_CENTER: &str = "# Opening hours\n\nWe are open 9am to 6pm on weekdays, and 10am to 4pm on Saturdays. \
We are closed on Sundays.\n\n# Delivery\n\nOrders ship within one business day. Delivery takes 2 to 4 days; \
express delivery arrives the next day for $9.\n\n# Returns\n\nYou can return anything within 30 days of delivery, \
free of charge: start a return from your order page.\n";

/// What the demo made.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Demo {
    pub agent_id: i64,
    pub knowledge_collection_id: i64,
    /// The channel the demo's conversations arrived on, as visitors' chats.
    pub webchat_channel_id: i64,
    /// The conversations the demo opened; the agent answers them in a moment.
    pub conversation_ids: Vec<i64>,
    /// The test call (`call_…`); it rings, talks and ends within a minute.
    pub call_id: Option<String>,
}

/// Who writes in, and what they ask.
const CONTACTS: &[(&str, &str, &str)] = &[
    ("demo-ana", "Ana Lima", "Hi! Are you open on Saturday?"),
    ("demo-bo", "Bo Chen", "How long does delivery take?"),
    ("demo-cy", "Cy Park", "Can I return a jacket I bought last week?"),
];

fn parsed<T>(p: parley_domain::validation::Parsed<T>) -> ServiceResult<T> {
    p.map_err(ServiceError::Validation)
}

/// Seeds the demo in `scope`, which must be a test mode (403 in live);
/// 409 while the demo agent exists.
pub async fn seed(svc: &Services, scope: Scope) -> ServiceResult<Demo> {
    if scope.mode != Mode::Test {
        return Err(ServiceError::Forbidden("The demo is made in test mode only: switch to test mode".into()));
    }
    let engines = agents::EngineNames::of(svc.config());
    let agent_body = json!({
        "name": AGENT_NAME,
        "description": "Answers questions about opening hours, delivery and returns from the demo help center.",
        "first_message": "Hi, this is Ava from Acme. How can I help?",
        "system_prompt": "You are Ava, Acme's support agent. Answer from the help center; be brief and friendly.",
        "tools": [{"type": "builtin", "name": "handoff_to_human"}],
    });
    let collection_input = parsed(knowledge::parse_collection(json!({"name": "Acme help center (demo)"}), true))?;
    let webchat = parsed(channels::parse_create(
        json!({"type": "webchat", "name": "Website chat (demo)", "config": {"greeting": "Hi! Ask us anything."}}),
    ))?;
    let trigger = parsed(agents::parse_create_trigger(json!({"event": "message.received", "channel": "*"})))?;
    let call_trigger = parsed(agents::parse_create_trigger(json!({"event": "call.inbound", "channel": "*"})))?;

    let (agent_id, collection_id, webchat_id) = svc
        .transaction(async |work| {
            if parley_store::repo::agents::id_by_name(work, scope, AGENT_NAME).await?.is_some() {
                return Err(ServiceError::Conflict(format!(
                    "The demo is already here: its agent is \"{AGENT_NAME}\". Archive it to seed the demo again"
                )));
            }
            let collection = knowledge::create(work, scope, collection_input).await?;
            let mut body = agent_body;
            body["knowledge_collection_ids"] = json!([collection.id]);
            let agent = agents::create(work, svc, scope, parsed(agents::parse_create(body, &engines))?).await?.agent;
            agents::create_trigger(work, scope, AgentId(agent.id), trigger).await?;
            agents::create_trigger(work, scope, AgentId(agent.id), call_trigger).await?;
            let webchat = channels::create(work, svc, scope, webchat).await?.channel;
            Ok((agent.id, collection.id, webchat.id))
        })
        .await?;

    let document = parsed(knowledge::parse_text_document(
        json!({"title": "Help center", "text": HELP_CENTER, "content_type": "text/markdown"}),
    ))?;
    let document = knowledge::add_document(svc, scope, CollectionId(collection_id), document).await?;
    // The agent should answer from the help center: let it be indexed first
    // (a job on this or another instance; a second or so).
    for _ in 0..150 {
        let now = knowledge::get_document(svc, scope, CollectionId(collection_id), DocumentId(document.id)).await?;
        if now.status != parley_domain::knowledge::DocumentStatus::Processing {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let channel = {
        let mut c = svc.db.read().await?;
        parley_store::repo::channels::get(&mut c, scope, webchat_id)
            .await?
            .ok_or_else(|| ServiceError::not_found("Channel", webchat_id))?
    };
    let mut conversation_ids = Vec::new();
    for (from, name, text) in CONTACTS {
        let inbound: parley_connectors::Inbound = serde_json::from_value(json!({
            "from": from, "text": text, "external_id": format!("demo-{from}"),
            "contact": {"display_name": name},
        }))
        .map_err(|e| ServiceError::internal(e, "the demo's message"))?;
        let received = channels::take_message(svc, scope, &channel, inbound).await?;
        conversation_ids.push(received.message.conversation_id);
    }

    let call = parsed(calls::parse_create(
        json!({"agent_id": agent_id, "to": "+15005550006", "record": true, "max_duration_s": 60}),
        svc.config().contacts.default_region,
    ))?;
    let call_id = match calls::place(svc, scope, None, call).await {
        Ok(answered) => serde_json::from_str::<Value>(&answered.answer.body)
            .ok()
            .and_then(|call| call.get("id").and_then(Value::as_str).map(str::to_owned)),
        // The rest of the demo stands without its call (voice turned off).
        Err(e) => {
            tracing::info!(error = %e, "the demo's test call was not placed");
            None
        }
    };
    Ok(Demo {
        agent_id,
        knowledge_collection_id: collection_id,
        webchat_channel_id: webchat_id,
        conversation_ids,
        call_id,
    })
}
