//! The tools' operations, one per REST operation: each calls the same
//! service operation as the route's handler, with arguments read by the
//! same parsers (see [`crate::catalog`] for how arguments reach them).

use futures::future::BoxFuture;
use parley_agent_runtime::playground;
use parley_domain::Scope;
use parley_domain::contact::Origin;
use parley_domain::conversation::{Author, AuthorType};
use parley_domain::ids::{
    AgentId, AttemptId, ChannelId, CollectionId, ContactId, ConversationId, DocumentId, EndpointId, HandoffId,
    MessageId, PromptBlockId, RunId, TriggerId,
};
use parley_domain::validation::{FieldError, Page, loc};
use parley_services::agents::runs;
use parley_services::crm::contacts;
use parley_services::messaging::{channels, conversations, handoffs, labels, messages, notes};
use parley_services::tenancy::auth::Principal;
use parley_services::{Answer, Idempotent, ServiceError, ServiceResult, Services, agents, billing, calls};
use parley_services::{agents::prompt_blocks, knowledge};
use parley_services::{search, webhooks};
use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::{Call, Run, ToolSpec, answered, engines, items, to_value};

// ---- the tools ---------------------------------------------------------------

/// Defines tool operations: `name(svc, who, scope, call) { body }`, the
/// body an async block's, `scope` the caller's (switched) scope.
macro_rules! operations {
    ($($name:ident($svc:ident, $who:ident, $scope:ident, $c:ident) $body:block)*) => {$(
        #[allow(unused_variables, unused_mut)]
        fn $name<'a>($svc: &'a Services, $who: Principal, mut $c: Call) -> BoxFuture<'a, ServiceResult<Value>> {
            let $scope = $who.scope;
            Box::pin(async move $body)
        }
    )*};
}

/// The parsed body; an error if the parser reported any (they are in `c`).
fn parsed<T>(v: Option<T>) -> ServiceResult<T> {
    v.ok_or_else(|| ServiceError::invariant("a body parser failed without saying why"))
}

/// Runs `op` in a unit of work under the call's idempotency key (if any),
/// answering its result as the REST route would with `status`.
async fn written<T: Serialize>(
    svc: &Services,
    scope: Scope,
    idem: Option<Idempotent>,
    status: u16,
    op: impl AsyncFnOnce(&mut parley_services::Work) -> ServiceResult<T>,
) -> ServiceResult<Value> {
    answered(svc.write(scope, idem, async move |work| Answer::json(status, &op(work).await?)).await?)
}

operations! {
    list_agents(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = agents::parse_filter(&mut c.query);
        c.finish()?;
        c.cached_page(scope, agents::VERSION_KEY, || async {
            let (agents, total) = agents::list(svc, scope, &filter, page).await?;
            Ok(json!({"agents": to_value(&agents)?, "count": agents.len(), "total": total}))
        })
        .await
    }
    get_agent(svc, who, scope, c) {
        let id = AgentId(c.id("agent_id"));
        c.finish()?;
        to_value(agents::get(svc, scope, id).await?)
    }
    create_agent(svc, who, scope, c) {
        let names = engines(svc);
        let input = c.body(|b| agents::parse_create(b, &names));
        c.finish()?;
        let input = parsed(input)?;
        agents::prepare(svc, &input.changes).await?;
        written(svc, scope, c.idem, 201, async move |work| agents::create(work, svc, scope, input).await).await
    }
    update_agent(svc, who, scope, c) {
        let id = AgentId(c.id("agent_id"));
        let names = engines(svc);
        let input = c.body(|b| agents::parse_update(b, &names));
        c.finish()?;
        let input = parsed(input)?;
        agents::prepare(svc, &input.changes).await?;
        to_value(svc.transaction(async move |work| agents::update(work, svc, scope, id, input).await).await?)
    }
    archive_agent(svc, who, scope, c) {
        let id = AgentId(c.id("agent_id"));
        c.finish()?;
        to_value(svc.transaction(async move |work| agents::archive(work, scope, id).await).await?)
    }
    preview_agent_prompt(svc, who, scope, c) {
        let id = AgentId(c.id("agent_id"));
        let input = c.body(agents::parse_preview);
        c.finish()?;
        to_value(agents::preview_prompt(svc, scope, id, parsed(input)?).await?)
    }
    chat_with_agent(svc, who, scope, c) {
        let id = AgentId(c.id("agent_id"));
        let input = c.body(playground::parse_chat);
        c.finish()?;
        to_value(playground::chat(svc, scope, id, parsed(input)?, None).await?)
    }
    list_triggers(svc, who, scope, c) {
        let id = AgentId(c.id("agent_id"));
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(agents::list_triggers(svc, scope, id, page).await?, page)
    }
    create_trigger(svc, who, scope, c) {
        let id = AgentId(c.id("agent_id"));
        let input = c.body(agents::parse_create_trigger);
        c.finish()?;
        let input = parsed(input)?;
        written(svc, scope, c.idem, 201, async move |work| agents::create_trigger(work, scope, id, input).await).await
    }
    delete_trigger(svc, who, scope, c) {
        let (agent, id) = (AgentId(c.id("agent_id")), TriggerId(c.id("trigger_id")));
        c.finish()?;
        svc.transaction(async move |work| agents::delete_trigger(work, scope, agent, id).await).await?;
        Ok(json!({"deleted": true}))
    }
    list_agent_runs(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = runs::parse_filter(&mut c.query);
        c.finish()?;
        items(runs::list(svc, scope, &filter, page).await?, page)
    }
    get_agent_run(svc, who, scope, c) {
        let id = c.id("run_id");
        c.finish()?;
        to_value(runs::get(svc, scope, RunId(id)).await?)
    }
    list_text_engines(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(agents::text_engines(svc, page), page)
    }
    list_speech_engines(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(calls::speech_engines(svc, page), page)
    }
    list_prompt_blocks(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = prompt_blocks::parse_filter(&mut c.query);
        c.finish()?;
        c.cached_page(scope, prompt_blocks::VERSION_KEY, || async {
            items(prompt_blocks::list(svc, scope, &filter, page).await?, page)
        })
        .await
    }
    get_prompt_block(svc, who, scope, c) {
        let id = c.id("block_id");
        c.finish()?;
        to_value(prompt_blocks::get(svc, scope, PromptBlockId(id)).await?)
    }
    create_prompt_block(svc, who, scope, c) {
        let input = c.body(prompt_blocks::parse_create);
        c.finish()?;
        let input = parsed(input)?;
        written(svc, scope, c.idem, 201, async move |work| prompt_blocks::create(work, scope, input).await).await
    }
    update_prompt_block(svc, who, scope, c) {
        let id = c.id("block_id");
        let input = c.body(prompt_blocks::parse_update);
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| prompt_blocks::update(work, scope, PromptBlockId(id), input).await).await?)
    }
    delete_prompt_block(svc, who, scope, c) {
        let id = c.id("block_id");
        c.finish()?;
        svc.transaction(async move |work| prompt_blocks::delete(work, scope, PromptBlockId(id)).await).await?;
        Ok(json!({"deleted": true}))
    }
    list_knowledge_collections(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(knowledge::list(svc, scope, page).await?, page)
    }
    get_knowledge_collection(svc, who, scope, c) {
        let id = c.id("collection_id");
        c.finish()?;
        to_value(knowledge::get(svc, scope, CollectionId(id)).await?)
    }
    create_knowledge_collection(svc, who, scope, c) {
        let input = c.body(|b| knowledge::parse_collection(b, true));
        c.finish()?;
        let input = parsed(input)?;
        written(svc, scope, c.idem, 201, async move |work| knowledge::create(work, scope, input).await).await
    }
    delete_knowledge_collection(svc, who, scope, c) {
        let id = c.id("collection_id");
        c.finish()?;
        let files = svc.transaction(async move |work| knowledge::delete(work, scope, CollectionId(id)).await).await?;
        knowledge::remove_files(svc, files).await;
        Ok(json!({"deleted": true}))
    }
    list_knowledge_documents(svc, who, scope, c) {
        let id = c.id("collection_id");
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(knowledge::list_documents(svc, scope, CollectionId(id), page).await?, page)
    }
    add_knowledge_document(svc, who, scope, c) {
        let id = c.id("collection_id");
        let input = c.body(knowledge::parse_text_document);
        c.finish()?;
        to_value(knowledge::add_document(svc, scope, CollectionId(id), parsed(input)?).await?)
    }
    query_knowledge_collection(svc, who, scope, c) {
        let id = c.id("collection_id");
        let request = knowledge::parse_query(&mut c.query);
        if request.is_none() && !c.query.has("q") {
            c.errors.push(FieldError::missing(loc(&["arguments", "q"])));
        }
        c.finish()?;
        let (items, total) = knowledge::query(svc, scope, CollectionId(id), &parsed(request)?).await?;
        Ok(json!({"items": to_value(items)?, "total": total}))
    }
    list_calls(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = calls::parse_filter(&mut c.query);
        c.finish()?;
        items(calls::list(svc, scope, &filter, page).await?, page)
    }
    get_call(svc, who, scope, c) {
        let id = c.text("call_id");
        c.finish()?;
        to_value(calls::get(svc, scope, &id).await?)
    }
    create_call(svc, who, scope, c) {
        let region = svc.config().contacts.default_region;
        let input = c.body(|b| calls::parse_create(b, region));
        c.finish()?;
        let done = calls::place(svc, scope, c.idem, parsed(input)?).await?;
        if done.answer.status >= 400 {
            // The provider failed: the call is stored as failed (REST's 502).
            return Err(ServiceError::Unavailable(done.answer.body));
        }
        answered(done)
    }
    get_call_transcript(svc, who, scope, c) {
        let id = c.text("call_id");
        c.finish()?;
        to_value(calls::transcript(svc, scope, &id).await?)
    }
    get_call_recording(svc, who, scope, c) {
        let id = c.text("call_id");
        c.finish()?;
        to_value(calls::recording(svc, scope, &id).await?)
    }
    hang_up_call(svc, who, scope, c) {
        let id = c.text("call_id");
        c.finish()?;
        to_value(calls::hangup(svc, scope, &id).await?)
    }
    list_channels(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let kind = channels::parse_filter(&mut c.query);
        c.finish()?;
        items(channels::list(svc, scope, kind, page).await?, page)
    }
    get_channel(svc, who, scope, c) {
        let id = c.id("channel_id");
        c.finish()?;
        to_value(channels::get(svc, scope, ChannelId(id)).await?)
    }
    list_conversations(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = conversations::parse_filter(&mut c.query);
        c.finish()?;
        c.cached_page(scope, conversations::VERSION_KEY, || async {
            items(conversations::list(svc, scope, &filter, page).await?, page)
        })
        .await
    }
    get_conversation(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        c.finish()?;
        to_value(conversations::get(svc, scope, id).await?)
    }
    update_conversation(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let input = c.body(conversations::parse_update);
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| conversations::update(work, scope, id, input).await).await?)
    }
    mark_conversation_read(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        c.finish()?;
        to_value(svc.transaction(async move |work| conversations::mark_read(work, scope, id).await).await?)
    }
    list_messages(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let page = Page::read(&mut c.query);
        let newest_first = conversations::parse_message_order(&mut c.query);
        c.finish()?;
        items(conversations::messages(svc, scope, id, newest_first, page).await?, page)
    }
    get_message(svc, who, scope, c) {
        let id = c.id("message_id");
        c.finish()?;
        to_value(messages::get(svc, scope, MessageId(id)).await?)
    }
    send_message(svc, who, scope, c) {
        let input = c.body(messages::parse_send);
        c.finish()?;
        let input = parsed(input)?;
        // An API key sends as the workspace's agent, as over REST.
        let sender = who.user_id().map_or(messages::Sender::Agent, messages::Sender::User);
        answered(messages::send_answered(svc, scope, c.idem, sender, input).await?)
    }
    handoff_conversation(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let input = c.body(handoffs::parse_create);
        c.finish()?;
        let input = parsed(input)?;
        let by = match who.user_id() {
            Some(user) => Author { kind: AuthorType::User, id: Some(user) },
            None => Author { kind: AuthorType::System, id: None },
        };
        to_value(svc.transaction(async move |work| handoffs::request(work, scope, id, by, input).await).await?)
    }
    list_handoffs(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = handoffs::parse_filter(&mut c.query);
        c.finish()?;
        items(handoffs::list(svc, scope, &filter, page).await?, page)
    }
    get_handoff(svc, who, scope, c) {
        let id = HandoffId(c.id("handoff_id"));
        c.finish()?;
        to_value(handoffs::get(svc, scope, id).await?)
    }
    complete_handoff(svc, who, scope, c) {
        let id = HandoffId(c.id("handoff_id"));
        let input = c.body(handoffs::parse_complete);
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| handoffs::complete(work, scope, id, input).await).await?)
    }
    cancel_handoff(svc, who, scope, c) {
        let id = HandoffId(c.id("handoff_id"));
        c.finish()?;
        to_value(svc.transaction(async move |work| handoffs::cancel(work, scope, id).await).await?)
    }
    assign_conversation(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let input = c.body(handoffs::parse_assign);
        c.finish()?;
        let input = parsed(input)?;
        let actor = who.user_id();
        to_value(svc.transaction(async move |work| handoffs::assign(work, scope, id, actor, input).await).await?)
    }
    give_back_conversation(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let input = c.body(handoffs::parse_give_back);
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| handoffs::give_back(work, scope, id, input).await).await?)
    }
    list_notes(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(notes::list(svc, scope, id, page).await?, page)
    }
    reply_as_note(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let input = c.body(notes::parse_create);
        c.finish()?;
        let input = parsed(input)?;
        let author = who.user_id();
        to_value(svc.transaction(async move |work| notes::create(work, scope, id, author, input).await).await?)
    }
    list_labels(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(labels::list(svc, scope, page).await?, page)
    }
    label_conversation(svc, who, scope, c) {
        let id = ConversationId(c.id("conversation_id"));
        let input = c.body(labels::parse_set);
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| labels::set_on_conversation(work, scope, id, input).await).await?)
    }
    list_contacts(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = contacts::parse_filter(&mut c.query);
        c.finish()?;
        items(contacts::list(svc, scope, &filter, page).await?, page)
    }
    get_contact(svc, who, scope, c) {
        let id = c.id("contact_id");
        c.finish()?;
        to_value(contacts::get(svc, scope, ContactId(id)).await?)
    }
    create_contact(svc, who, scope, c) {
        let region = svc.config().contacts.default_region;
        let input = c.body(|b| contacts::parse_create(b, region));
        c.finish()?;
        let input = parsed(input)?;
        written(svc, scope, c.idem, 201, async move |work| contacts::create(work, scope, Origin::Manual, input).await)
            .await
    }
    update_contact(svc, who, scope, c) {
        let id = c.id("contact_id");
        let region = svc.config().contacts.default_region;
        let input = c.body(|b| contacts::parse_update(b, region));
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| contacts::update(work, scope, ContactId(id), input).await).await?)
    }
    delete_contact(svc, who, scope, c) {
        let id = c.id("contact_id");
        c.finish()?;
        svc.transaction(async move |work| contacts::delete(work, scope, ContactId(id)).await).await?;
        Ok(json!({"deleted": true}))
    }
    merge_contacts(svc, who, scope, c) {
        let input = c.body(contacts::parse_merge);
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| contacts::merge(work, scope, input).await).await?)
    }
    discover_contacts(svc, who, scope, c) {
        let input = c.body(contacts::parse_discover);
        c.finish()?;
        let create = parsed(input)?.create.unwrap_or(false);
        let config = svc.config().contacts.clone();
        to_value(svc.transaction(async move |work| contacts::discover(work, scope, &config, create).await).await?)
    }
    search(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let request = search::parse(&mut c.query);
        if let Err(e) = search::check_window(page) {
            c.errors.push(e);
        }
        c.finish()?;
        let found = search::search(svc, scope, &parsed(request)?, page).await?;
        Ok(json!({"items": to_value(found.hits)?, "total": found.total, "total_relation": to_value(found.relation)?,
                  "limit": page.limit, "offset": page.offset}))
    }
    get_balance(svc, who, scope, c) {
        c.finish()?;
        to_value(billing::balance(svc, scope).await?)
    }
    list_transactions(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let filter = billing::parse_filter(&mut c.query);
        c.finish()?;
        items(billing::transactions(svc, scope, &filter, page).await?, page)
    }
    list_webhooks(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(webhooks::list(svc, &who, page).await?, page)
    }
    get_webhook(svc, who, scope, c) {
        let id = EndpointId(c.id("webhook_id"));
        c.finish()?;
        to_value(webhooks::get(svc, &who, id).await?)
    }
    create_webhook(svc, who, scope, c) {
        let input = c.body(webhooks::parse_create);
        c.finish()?;
        let input = parsed(input)?;
        webhooks::prepare_create(svc, &who, &input).await?;
        written(svc, scope, c.idem, 201, async move |work| webhooks::create(work, svc, scope, input).await).await
    }
    delete_webhook(svc, who, scope, c) {
        let id = EndpointId(c.id("webhook_id"));
        c.finish()?;
        svc.transaction(async move |work| webhooks::delete(work, &who, id).await).await?;
        Ok(json!({"deleted": true}))
    }
    send_test_event(svc, who, scope, c) {
        let id = EndpointId(c.id("webhook_id"));
        c.finish()?;
        to_value(svc.transaction(async move |work| webhooks::send_test(work, &who, id).await).await?)
    }
    list_webhook_deliveries(svc, who, scope, c) {
        let id = EndpointId(c.id("webhook_id"));
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(webhooks::list_attempts(svc, &who, id, page).await?, page)
    }
    list_events(svc, who, scope, c) {
        let page = Page::read(&mut c.query);
        let kind = webhooks::parse_event_filter(&mut c.query);
        c.finish()?;
        items(webhooks::list_events(svc, scope, kind.as_deref(), page).await?, page)
    }
    get_event(svc, who, scope, c) {
        let id = c.text("event_id");
        c.finish()?;
        to_value(webhooks::get_event(svc, scope, &id).await?)
    }
    get_trigger(svc, who, scope, c) {
        let (agent, id) = (AgentId(c.id("agent_id")), TriggerId(c.id("trigger_id")));
        c.finish()?;
        to_value(agents::get_trigger(svc, scope, agent, id).await?)
    }
    update_trigger(svc, who, scope, c) {
        let (agent, id) = (AgentId(c.id("agent_id")), TriggerId(c.id("trigger_id")));
        let input = c.body(agents::parse_update_trigger);
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| agents::update_trigger(work, scope, agent, id, input).await).await?)
    }
    list_prompt_block_versions(svc, who, scope, c) {
        let id = c.id("block_id");
        let page = Page::read(&mut c.query);
        c.finish()?;
        items(prompt_blocks::list_versions(svc, scope, PromptBlockId(id), page).await?, page)
    }
    update_knowledge_collection(svc, who, scope, c) {
        let id = c.id("collection_id");
        let input = c.body(|b| knowledge::parse_collection(b, false));
        c.finish()?;
        let input = parsed(input)?;
        to_value(svc.transaction(async move |work| knowledge::update(work, scope, CollectionId(id), input).await).await?)
    }
    get_knowledge_document(svc, who, scope, c) {
        let (collection, id) = (c.id("collection_id"), c.id("document_id"));
        c.finish()?;
        to_value(knowledge::get_document(svc, scope, CollectionId(collection), DocumentId(id)).await?)
    }
    delete_knowledge_document(svc, who, scope, c) {
        let (collection, id) = (c.id("collection_id"), c.id("document_id"));
        c.finish()?;
        let file = svc.transaction(async move |work| knowledge::delete_document(work, scope, CollectionId(collection), DocumentId(id)).await).await?;
        knowledge::remove_files(svc, vec![file]).await;
        Ok(json!({"deleted": true}))
    }
    create_channel(svc, who, scope, c) {
        let input = c.body(channels::parse_create);
        c.finish()?;
        let input = parsed(input)?;
        channels::prepare(svc, input.kind, input.config.as_ref()).await?;
        written(svc, scope, c.idem, 201, async move |work| channels::create(work, svc, scope, input).await).await
    }
    update_channel(svc, who, scope, c) {
        let id = c.id("channel_id");
        let input = c.body(channels::parse_update);
        c.finish()?;
        let input = parsed(input)?;
        channels::prepare_update(svc, scope, ChannelId(id), &input).await?;
        to_value(svc.transaction(async move |work| channels::update(work, svc, scope, ChannelId(id), input).await).await?)
    }
    delete_channel(svc, who, scope, c) {
        let id = c.id("channel_id");
        c.finish()?;
        svc.transaction(async move |work| channels::delete(work, scope, ChannelId(id)).await).await?;
        Ok(json!({"deleted": true}))
    }
    update_webhook(svc, who, scope, c) {
        let id = EndpointId(c.id("webhook_id"));
        let input = c.body(webhooks::parse_update);
        c.finish()?;
        let input = parsed(input)?;
        webhooks::prepare_update(svc, &who, &input).await?;
        to_value(svc.transaction(async move |work| webhooks::update(work, scope, id, input).await).await?)
    }
    rotate_webhook_secret(svc, who, scope, c) {
        let id = EndpointId(c.id("webhook_id"));
        c.finish()?;
        to_value(svc.transaction(async move |work| webhooks::rotate_secret(work, svc, &who, id).await).await?)
    }
    retry_webhook_delivery(svc, who, scope, c) {
        let (id, attempt) = (EndpointId(c.id("webhook_id")), AttemptId(c.id("delivery_id")));
        c.finish()?;
        to_value(svc.transaction(async move |work| webhooks::retry(work, &who, id, attempt).await).await?)
    }
}

const fn tool(name: &'static str, title: &'static str, method: &'static str, path: &'static str, run: Run) -> ToolSpec {
    ToolSpec { name, title, method, path, open_world: false, irreversible: false, reads_only: false, run }
}

const fn reaching_out(spec: ToolSpec) -> ToolSpec {
    ToolSpec { open_world: true, ..spec }
}

const fn irreversible(spec: ToolSpec) -> ToolSpec {
    ToolSpec { irreversible: true, ..spec }
}

const fn reading(spec: ToolSpec) -> ToolSpec {
    ToolSpec { reads_only: true, ..spec }
}

const AGENT: &str = "/api/v1/agents/{agent_id}";
const COLLECTION: &str = "/api/v1/knowledge-collections/{collection_id}";
const CALL: &str = "/api/v1/calls/{call_id}";
const CONVERSATION: &str = "/api/v1/conversations/{conversation_id}";
const HANDOFF: &str = "/api/v1/handoffs/{handoff_id}";
const WEBHOOK: &str = "/api/v1/webhooks/{webhook_id}";

pub static TOOLS: &[ToolSpec] = &[
    tool("list_agents", "List agents", "get", "/api/v1/agents", list_agents),
    tool("get_agent", "Get an agent", "get", AGENT, get_agent),
    tool("create_agent", "Create an agent", "post", "/api/v1/agents", create_agent),
    tool("update_agent", "Update an agent", "patch", AGENT, update_agent),
    tool("archive_agent", "Archive an agent", "delete", AGENT, archive_agent),
    reading(tool(
        "preview_agent_prompt",
        "Preview an agent's prompt",
        "post",
        "/api/v1/agents/{agent_id}/prompt/preview",
        preview_agent_prompt,
    )),
    tool(
        "chat_with_agent",
        "Chat with an agent (playground)",
        "post",
        "/api/v1/agents/{agent_id}/chat",
        chat_with_agent,
    ),
    tool("list_triggers", "List an agent's triggers", "get", "/api/v1/agents/{agent_id}/triggers", list_triggers),
    tool("create_trigger", "Add a trigger to an agent", "post", "/api/v1/agents/{agent_id}/triggers", create_trigger),
    tool(
        "delete_trigger",
        "Delete a trigger",
        "delete",
        "/api/v1/agents/{agent_id}/triggers/{trigger_id}",
        delete_trigger,
    ),
    tool("get_trigger", "Get a trigger", "get", "/api/v1/agents/{agent_id}/triggers/{trigger_id}", get_trigger),
    tool(
        "update_trigger",
        "Update a trigger",
        "patch",
        "/api/v1/agents/{agent_id}/triggers/{trigger_id}",
        update_trigger,
    ),
    tool("list_agent_runs", "List agent runs", "get", "/api/v1/agent-runs", list_agent_runs),
    tool("get_agent_run", "Get an agent run", "get", "/api/v1/agent-runs/{run_id}", get_agent_run),
    tool("list_text_engines", "List text engines", "get", "/api/v1/text-engines", list_text_engines),
    tool("list_prompt_blocks", "List prompt blocks", "get", "/api/v1/prompt-blocks", list_prompt_blocks),
    tool("get_prompt_block", "Get a prompt block", "get", "/api/v1/prompt-blocks/{block_id}", get_prompt_block),
    tool("create_prompt_block", "Create a prompt block", "post", "/api/v1/prompt-blocks", create_prompt_block),
    tool(
        "update_prompt_block",
        "Update a prompt block",
        "patch",
        "/api/v1/prompt-blocks/{block_id}",
        update_prompt_block,
    ),
    tool(
        "delete_prompt_block",
        "Delete a prompt block",
        "delete",
        "/api/v1/prompt-blocks/{block_id}",
        delete_prompt_block,
    ),
    tool(
        "list_prompt_block_versions",
        "List a prompt block's versions",
        "get",
        "/api/v1/prompt-blocks/{block_id}/versions",
        list_prompt_block_versions,
    ),
    tool(
        "list_knowledge_collections",
        "List knowledge collections",
        "get",
        "/api/v1/knowledge-collections",
        list_knowledge_collections,
    ),
    tool("get_knowledge_collection", "Get a knowledge collection", "get", COLLECTION, get_knowledge_collection),
    tool(
        "create_knowledge_collection",
        "Create a knowledge collection",
        "post",
        "/api/v1/knowledge-collections",
        create_knowledge_collection,
    ),
    tool(
        "delete_knowledge_collection",
        "Delete a knowledge collection",
        "delete",
        COLLECTION,
        delete_knowledge_collection,
    ),
    tool(
        "update_knowledge_collection",
        "Update a knowledge collection",
        "patch",
        COLLECTION,
        update_knowledge_collection,
    ),
    tool(
        "list_knowledge_documents",
        "List a collection's documents",
        "get",
        "/api/v1/knowledge-collections/{collection_id}/documents",
        list_knowledge_documents,
    ),
    tool(
        "add_knowledge_document",
        "Add a text document to a collection",
        "post",
        "/api/v1/knowledge-collections/{collection_id}/documents",
        add_knowledge_document,
    ),
    tool(
        "get_knowledge_document",
        "Get a document",
        "get",
        "/api/v1/knowledge-collections/{collection_id}/documents/{document_id}",
        get_knowledge_document,
    ),
    tool(
        "delete_knowledge_document",
        "Delete a document",
        "delete",
        "/api/v1/knowledge-collections/{collection_id}/documents/{document_id}",
        delete_knowledge_document,
    ),
    tool(
        "query_knowledge_collection",
        "Query a knowledge collection",
        "get",
        "/api/v1/knowledge-collections/{collection_id}/query",
        query_knowledge_collection,
    ),
    tool("list_calls", "List calls", "get", "/api/v1/calls", list_calls),
    tool("list_speech_engines", "List speech engines", "get", "/api/v1/speech-engines", list_speech_engines),
    tool("get_call", "Get a call", "get", CALL, get_call),
    reaching_out(tool("create_call", "Place a call", "post", "/api/v1/calls", create_call)),
    tool(
        "get_call_transcript",
        "Get a call's transcript",
        "get",
        "/api/v1/calls/{call_id}/transcript",
        get_call_transcript,
    ),
    tool(
        "get_call_recording",
        "Get a link to a call's recording",
        "get",
        "/api/v1/calls/{call_id}/recording",
        get_call_recording,
    ),
    irreversible(tool("hang_up_call", "Hang up a call", "post", "/api/v1/calls/{call_id}/hangup", hang_up_call)),
    tool("list_channels", "List channels", "get", "/api/v1/channels", list_channels),
    tool("get_channel", "Get a channel", "get", "/api/v1/channels/{channel_id}", get_channel),
    tool("create_channel", "Create a channel", "post", "/api/v1/channels", create_channel),
    tool("update_channel", "Update a channel", "patch", "/api/v1/channels/{channel_id}", update_channel),
    tool("delete_channel", "Delete a channel", "delete", "/api/v1/channels/{channel_id}", delete_channel),
    tool("list_conversations", "List conversations", "get", "/api/v1/conversations", list_conversations),
    tool("get_conversation", "Get a conversation", "get", CONVERSATION, get_conversation),
    tool("update_conversation", "Update a conversation", "patch", CONVERSATION, update_conversation),
    tool(
        "mark_conversation_read",
        "Mark a conversation read",
        "post",
        "/api/v1/conversations/{conversation_id}/read",
        mark_conversation_read,
    ),
    tool(
        "list_messages",
        "List a conversation's messages",
        "get",
        "/api/v1/conversations/{conversation_id}/messages",
        list_messages,
    ),
    tool("get_message", "Get a message", "get", "/api/v1/messages/{message_id}", get_message),
    reaching_out(tool("send_message", "Send a message", "post", "/api/v1/messages", send_message)),
    tool(
        "handoff_conversation",
        "Hand a conversation over",
        "post",
        "/api/v1/conversations/{conversation_id}/handoff",
        handoff_conversation,
    ),
    tool("list_handoffs", "List handoffs", "get", "/api/v1/handoffs", list_handoffs),
    tool("get_handoff", "Get a handoff", "get", HANDOFF, get_handoff),
    tool("complete_handoff", "Complete a handoff", "post", "/api/v1/handoffs/{handoff_id}/complete", complete_handoff),
    tool("cancel_handoff", "Cancel a handoff", "post", "/api/v1/handoffs/{handoff_id}/cancel", cancel_handoff),
    tool(
        "assign_conversation",
        "Assign a conversation to a member",
        "post",
        "/api/v1/conversations/{conversation_id}/assign",
        assign_conversation,
    ),
    tool(
        "list_notes",
        "List a conversation's private notes",
        "get",
        "/api/v1/conversations/{conversation_id}/notes",
        list_notes,
    ),
    tool(
        "reply_as_note",
        "Add a private note to a conversation (never sent to the contact)",
        "post",
        "/api/v1/conversations/{conversation_id}/notes",
        reply_as_note,
    ),
    tool("list_labels", "List conversation labels", "get", "/api/v1/labels", list_labels),
    tool(
        "label_conversation",
        "Set a conversation's labels (replacing those it had)",
        "put",
        "/api/v1/conversations/{conversation_id}/labels",
        label_conversation,
    ),
    tool(
        "give_back_conversation",
        "Give a conversation back to an agent",
        "post",
        "/api/v1/conversations/{conversation_id}/give-back",
        give_back_conversation,
    ),
    tool("list_contacts", "List contacts", "get", "/api/v1/contacts", list_contacts),
    tool("get_contact", "Get a contact", "get", "/api/v1/contacts/{contact_id}", get_contact),
    tool("create_contact", "Create a contact", "post", "/api/v1/contacts", create_contact),
    tool("update_contact", "Update a contact", "patch", "/api/v1/contacts/{contact_id}", update_contact),
    tool("delete_contact", "Delete a contact", "delete", "/api/v1/contacts/{contact_id}", delete_contact),
    irreversible(tool("merge_contacts", "Merge two contacts", "post", "/api/v1/contacts/merge", merge_contacts)),
    tool(
        "discover_contacts",
        "Discover contacts from conversations",
        "post",
        "/api/v1/contacts/discover",
        discover_contacts,
    ),
    tool("search", "Search messages, conversations and contacts", "get", "/api/v1/search", search),
    tool("get_balance", "Get the balance", "get", "/api/v1/billing/balance", get_balance),
    tool("list_transactions", "List balance transactions", "get", "/api/v1/billing/transactions", list_transactions),
    tool("list_webhooks", "List webhook endpoints", "get", "/api/v1/webhooks", list_webhooks),
    tool("get_webhook", "Get a webhook endpoint", "get", WEBHOOK, get_webhook),
    reaching_out(tool("create_webhook", "Create a webhook endpoint", "post", "/api/v1/webhooks", create_webhook)),
    tool("delete_webhook", "Delete a webhook endpoint", "delete", WEBHOOK, delete_webhook),
    reaching_out(tool("update_webhook", "Update a webhook endpoint", "patch", WEBHOOK, update_webhook)),
    tool(
        "rotate_webhook_secret",
        "Rotate a webhook endpoint's signing secret",
        "post",
        "/api/v1/webhooks/{webhook_id}/rotate-secret",
        rotate_webhook_secret,
    ),
    reaching_out(tool(
        "retry_webhook_delivery",
        "Retry a webhook delivery",
        "post",
        "/api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
        retry_webhook_delivery,
    )),
    reaching_out(tool(
        "send_test_event",
        "Send a test event to a webhook endpoint",
        "post",
        "/api/v1/webhooks/{webhook_id}/test",
        send_test_event,
    )),
    tool(
        "list_webhook_deliveries",
        "List a webhook endpoint's delivery attempts",
        "get",
        "/api/v1/webhooks/{webhook_id}/deliveries",
        list_webhook_deliveries,
    ),
    tool("list_events", "List events", "get", "/api/v1/events", list_events),
    tool("get_event", "Get an event", "get", "/api/v1/events/{event_id}", get_event),
];
