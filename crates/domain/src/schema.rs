//! OpenAPI schemas for values that are checked by hand rather than typed
//! (sets of strings kept as constants), for `#[schema(schema_with = …)]`.
//! The constants they list are the ones the parsers check against, so the
//! document and the code cannot drift apart.

use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::{Array, ArrayBuilder, Object, RefOr};

/// A string that must be one of `values`.
pub fn string_enum(values: &[&str]) -> Object {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values.iter().copied())).build()
}

/// A trigger's channel: a channel name or `*`.
pub fn trigger_channel() -> Object {
    string_enum(crate::agent::TRIGGER_CHANNELS)
}

/// A conversation's channel.
pub fn channel() -> Object {
    string_enum(crate::channel::ChannelType::ALL)
}

/// A conversation kind.
pub fn conversation_kind() -> Object {
    string_enum(crate::conversation::ConversationKind::ALL)
}

/// A conversation kind, or null for any.
pub fn nullable_conversation_kind() -> Object {
    nullable(conversation_kind())
}

/// A prompt block's kind.
pub fn block_kind() -> Object {
    string_enum(crate::prompt::BlockKind::ALL)
}

/// `schema`, also accepting null.
pub fn nullable(schema: Object) -> Object {
    let mut schema = schema;
    let mut types = match &schema.schema_type {
        utoipa::openapi::schema::SchemaType::Type(t) => vec![t.clone()],
        utoipa::openapi::schema::SchemaType::Array(ts) => ts.clone(),
        utoipa::openapi::schema::SchemaType::AnyValue => return schema,
    };
    if !types.contains(&Type::Null) {
        types.push(Type::Null);
    }
    schema.schema_type = utoipa::openapi::schema::SchemaType::Array(types);
    if let Some(values) = schema.enum_values.as_mut() {
        values.push(serde_json::Value::Null);
    }
    schema
}

/// A list of up to `max` strings of `min_len..=max_len` characters.
pub fn strings(max: usize, min_len: usize, max_len: usize) -> Array {
    ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::String).min_length(Some(min_len)).max_length(Some(max_len)))
        .max_items(Some(max))
        .build()
}

/// A list of up to `max` distinct positive ids.
pub fn unique_ids(max: usize) -> Array {
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Int64)))
                .minimum(Some(1)),
        )
        .max_items(Some(max))
        .unique_items(true)
        .build()
}

/// 1–100 positive ids, a repeat allowed (a bulk change's conversations).
pub fn bulk_ids() -> Array {
    let mut ids = unique_ids(100);
    ids.unique_items = false;
    ids.min_items = Some(1);
    ids
}

/// `unique_ids(50)`, for `schema_with`.
pub fn unique_ids_50() -> Array {
    unique_ids(50)
}

/// The statuses an agent may be created with.
pub fn initial_agent_status() -> Object {
    string_enum(crate::agent::AgentStatus::INITIAL)
}

/// A handoff policy's keywords.
pub fn handoff_keywords() -> Array {
    strings(50, 1, 100)
}

/// A string of `min..=max` characters (add a format or pattern, then build).
pub fn string(min: usize, max: usize) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).min_length(Some(min)).max_length(Some(max))
}

/// A boolean.
pub fn boolean() -> Object {
    ObjectBuilder::new().schema_type(Type::Boolean).build()
}

/// A URL of at most 2,048 characters (`format: uri`), or null.
pub fn nullable_url() -> Object {
    nullable(string(1, 2048).format(Some(utoipa::openapi::SchemaFormat::Custom("uri".into()))).build())
}

/// `array`, also accepting null.
pub fn nullable_array(mut array: Array) -> Array {
    array.schema_type = SchemaType::from_iter([Type::Array, Type::Null]);
    array
}

/// An object of exactly these optional properties (`(name, schema,
/// description)`); any other property is refused.
pub fn closed_object(properties: Vec<(&str, RefOr<Schema>, &str)>) -> Object {
    let mut builder = ObjectBuilder::new().schema_type(Type::Object);
    for (name, schema, description) in properties {
        let described = match schema {
            RefOr::T(Schema::Object(mut o)) => {
                o.description = Some(description.to_owned());
                RefOr::T(Schema::Object(o))
            }
            RefOr::T(Schema::Array(mut a)) => {
                a.description = Some(description.to_owned());
                RefOr::T(Schema::Array(a))
            }
            other => other,
        };
        builder = builder.property(name, described);
    }
    builder.additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::FreeForm(false))).build()
}

/// A contact's tags.
pub fn contact_tags() -> Array {
    strings(50, 1, 50)
}

/// A positive integer id, described.
pub fn id(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Int64)))
        .minimum(Some(1))
        .description(Some(description.to_owned()))
}

/// The statuses a delivery report may give.
pub fn reported_status() -> Object {
    string_enum(&["sent", "delivered", "read", "failed"])
}

/// Prompt-block variable names.
pub fn variable_names() -> Array {
    ArrayBuilder::new()
        .items(string(1, 64).pattern(Some("^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$")))
        .max_items(Some(100))
        .unique_items(true)
        .build()
}

/// Conversation label names (`PUT /conversations/{id}/labels`).
pub fn label_names() -> Array {
    ArrayBuilder::new()
        .items(string(1, 50).pattern(Some("^[A-Za-z0-9_-]+$")))
        .max_items(Some(20))
        .unique_items(true)
        .build()
}

/// The event types a webhook endpoint subscribes to.
pub fn webhook_events() -> Array {
    let mut permitted = vec!["*"];
    permitted.extend_from_slice(crate::event::EventType::ALL);
    ArrayBuilder::new().items(string_enum(&permitted)).min_items(Some(1)).max_items(Some(64)).build()
}

/// Prompt variables: an object whose values are strings, numbers or booleans.
pub fn variable_values() -> Object {
    use utoipa::openapi::schema::AdditionalProperties;
    let scalar = ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Number, Type::Boolean]));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(Schema::Object(scalar.build())))))
        .build()
}

/// `asc` or `desc`.
pub fn sort_order() -> Object {
    string_enum(&["asc", "desc"])
}

/// What a search looks through.
pub fn search_type() -> Object {
    string_enum(&["messages", "conversations", "contacts", "all"])
}

/// An HTTP tool's headers: at most 10, names HTTP tokens (letters, digits,
/// `-`, `_`), values 1–1,000 printable ASCII characters.
pub fn tool_headers() -> Object {
    use utoipa::openapi::schema::AdditionalProperties;
    let value = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(1000))
        .pattern(Some(r"^[ -~]+$"));
    let name = ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^[A-Za-z0-9_-]{1,100}$"));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .max_properties(Some(10))
        .property_names(Some(name.build()))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(Schema::Object(value.build())))))
        .build()
}

/// The content types a document sent as JSON may have.
pub fn text_document_type() -> Object {
    string_enum(&["text/plain", "text/markdown", "text/html"])
}

/// A playground message's author.
pub fn chat_role() -> Object {
    string_enum(&["user", "assistant"])
}
