//! Contacts: create, read, list, update, delete and merge, with normalised
//! phone numbers and emails that are unique per workspace and mode; channel
//! identities; and address resolution for inbound traffic.

use parley_domain::Scope;
use parley_domain::channel::ChannelType;
use parley_domain::contact::{Contact, Identity, Origin, Phone, Region, canonical_name};
use parley_domain::email::Email;
use parley_domain::event::EventType;
use parley_domain::ids::ContactId;
use parley_domain::validation::{
    FieldError, LocPart, ObjectReader, Page, Parsed, QueryReader, boolean, enum_value, integer, json_object, list_of,
    loc, object, parse_object, string,
};
use parley_events::ssrf;
use parley_store::Tx;
use parley_store::repo::contacts::{self as repo, AddressColumn, ContactFields, SearchTerms};
use parley_store::repo::conversations;
use parley_store::repo::events;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, event_data};

/// The filters lists take.
pub use parley_store::repo::contacts::ContactFilter;

const NAME_MAX: usize = 200;
const NOTES_MAX: usize = 10_000;
const TAG_MAX: usize = 50;
const TAGS_MAX: usize = 50;
const IDENTITIES_MAX: usize = 20;
const METADATA_MAX_BYTES: usize = 4_096;

/// Settings the contact rules need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactsConfig {
    /// Where numbers written without a country code are read.
    pub default_region: Region,
    /// Create a `discovered` contact for inbound traffic from an unknown address.
    pub auto_create: bool,
}

impl Default for ContactsConfig {
    fn default() -> Self {
        Self { default_region: Region::default(), auto_create: true }
    }
}

/// Fields of a create or update; absent fields stay as they are, and `null`
/// clears a field that can be empty (`phone`, `email`, `avatar_url`,
/// `notes`). Lists and `metadata` are replaced whole: send `[]` or `{}` to
/// empty them.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"display_name": "Ana Lima", "phone": "(415) 555-0100", "email": "ana@example.com", "tags": ["vip"]}))]
pub struct ContactChanges {
    /// 1–200 characters. At creation it defaults to the email or phone.
    #[schema(nullable = false, min_length = 1, max_length = 200)]
    pub display_name: Option<String>,
    /// Any common format, up to 40 characters; stored as E.164 in
    /// `normalized_phone`. Numbers without a country code are read in
    /// `contacts.default_region`. Null clears it.
    #[schema(value_type = Option<String>, nullable, format = "phone", min_length = 1, max_length = 40)]
    pub phone: Option<Option<String>>,
    /// Up to 254 characters; stored trimmed, lower-cased, with an IDNA
    /// domain, in `normalized_email`. Null clears it.
    #[schema(value_type = Option<String>, nullable, format = "email", min_length = 1, max_length = 254)]
    pub email: Option<Option<String>>,
    /// An http(s) URL without credentials (up to 2,048 characters), or null.
    #[schema(value_type = Option<String>, nullable, format = "uri", min_length = 1, max_length = 2048)]
    pub avatar_url: Option<Option<String>>,
    /// Up to 10,000 characters, or null.
    #[schema(value_type = Option<String>, nullable, max_length = 10000)]
    pub notes: Option<Option<String>>,
    /// Up to 50 tags of 1–50 characters (trimmed; repeats dropped); replaces the whole list.
    #[schema(schema_with = parley_domain::schema::contact_tags)]
    pub tags: Option<Vec<String>>,
    /// Up to 20 identities; replaces every identity of the contact.
    #[schema(value_type = Option<Vec<parley_domain::contact::IdentityInput>>, nullable = false, max_items = 20)]
    pub identities: Option<Vec<Identity>>,
    /// Free-form JSON object of at most 4 KiB serialised; replaces the whole object.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub metadata: Option<Map<String, Value>>,
}

/// `POST /api/v1/contacts`: the fields of [`ContactChanges`], at least one of
/// `display_name`, `phone` and `email` among them.
pub struct CreateContact;

impl utoipa::PartialSchema for CreateContact {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, ObjectBuilder};
        // Present and not null: `"phone": null` names no address.
        let named = ["display_name", "phone", "email"].into_iter().fold(AnyOfBuilder::new(), |any, field| {
            any.item(
                ObjectBuilder::new()
                    .property(field, ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::String))
                    .required(field),
            )
        });
        AllOfBuilder::new()
            .description(Some("A new contact: a name, or an address to be named after, is required."))
            .examples([serde_json::json!({"display_name": "Bo Chen", "email": "bo@example.com"})])
            .item(utoipa::openapi::Ref::from_schema_name("ContactChanges"))
            .item(named)
            .into()
    }
}

impl utoipa::ToSchema for CreateContact {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push(("ContactChanges".into(), <ContactChanges as utoipa::PartialSchema>::schema()));
        <ContactChanges as utoipa::ToSchema>::schemas(schemas);
    }
}

/// `POST /api/v1/contacts/merge`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"primary_id": 1, "duplicate_id": 2}))]
pub struct MergeContacts {
    /// The contact that stays.
    #[schema(minimum = 1)]
    pub primary_id: i64,
    /// The contact whose identities, conversations and calls move to the
    /// primary, and which is then deleted; not the primary.
    #[schema(minimum = 1)]
    pub duplicate_id: i64,
}

/// What `contact.merged` carries.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MergedEvent {
    pub primary_id: i64,
    pub duplicate_id: i64,
    /// The primary as it is after the merge.
    pub contact: Contact,
}

// --- Parsing ----------------------------------------------------------------

fn phone(region: Region) -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    move |v, l| {
        let raw = string(1, 40)(v, l)?;
        Phone::parse(&raw, region)
            .map(|p| p.as_str().to_owned())
            .map_err(|m| vec![FieldError::new(l.to_vec(), "value_error.phone", m)])
    }
}

fn email() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    |v, l| {
        let raw = string(1, 254)(v, l)?;
        Email::parse(&raw)
            .map(|e| e.as_str().to_owned())
            .map_err(|m| vec![FieldError::new(l.to_vec(), "value_error.email", m)])
    }
}

fn avatar_url() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    |v, l| {
        let raw = string(1, 2048)(v, l)?;
        ssrf::parse_target(&raw)
            .map(|u| u.to_string())
            .map_err(|e| vec![FieldError::new(l.to_vec(), "value_error.url", e.to_string())])
    }
}

/// Tags: trimmed, empty ones refused, repeats dropped (first kept).
fn tags() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Vec<String>> {
    |v, l| {
        let raw = list_of(TAGS_MAX, |v, l| string(1, TAG_MAX)(v, l))(v, l)?;
        Ok(clean_tags(raw))
    }
}

pub(crate) fn clean_tags(raw: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in raw {
        let t = t.trim().to_owned();
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

fn identities(region: Region) -> impl FnOnce(Value, &[LocPart]) -> Parsed<Vec<Identity>> {
    move |v, l| {
        let list = list_of(IDENTITIES_MAX, move |v, l| {
            object(move |r: &mut ObjectReader<'_>| {
                let channel = r.required("channel", enum_value::<ChannelType>());
                let address = r.required("address", string(1, 255));
                let (channel, address) = (channel?, address?);
                match Identity::parse(channel, &address, region) {
                    Ok(identity) => Some(identity),
                    Err((kind, msg)) => {
                        r.push_error(FieldError::new(r.loc_of("address"), kind, msg));
                        None
                    }
                }
            })(v, l)
        })(v, l)?;
        let mut out: Vec<Identity> = Vec::new();
        for identity in list {
            if !out.contains(&identity) {
                out.push(identity);
            }
        }
        Ok(out)
    }
}

fn read_changes(r: &mut ObjectReader<'_>, region: Region) -> ContactChanges {
    ContactChanges {
        display_name: r.optional("display_name", string(1, NAME_MAX)),
        phone: r.nullable("phone", phone(region)),
        email: r.nullable("email", email()),
        avatar_url: r.nullable("avatar_url", avatar_url()),
        notes: r.nullable("notes", string(0, NOTES_MAX)),
        tags: r.optional("tags", tags()),
        identities: r.optional("identities", identities(region)),
        metadata: r.optional("metadata", json_object(METADATA_MAX_BYTES)),
    }
}

pub fn parse_create(body: Value, region: Region) -> Parsed<ContactChanges> {
    parse_object(body, loc(&["body"]), |r| {
        // A contact needs a name, or an address to be named after.
        if !["display_name", "phone", "email"].iter().any(|k| r.contains(k)) {
            r.push_error(FieldError::missing(r.loc_of("display_name")));
        }
        Some(read_changes(r, region))
    })
}

pub fn parse_update(body: Value, region: Region) -> Parsed<ContactChanges> {
    parse_object(body, loc(&["body"]), |r| Some(read_changes(r, region)))
}

pub fn parse_merge(body: Value) -> Parsed<MergeContacts> {
    parse_object(body, loc(&["body"]), |r| {
        let primary_id = r.required("primary_id", integer(1, i64::MAX));
        let duplicate_id = r.required("duplicate_id", integer(1, i64::MAX));
        let (primary_id, duplicate_id) = (primary_id?, duplicate_id?);
        if primary_id == duplicate_id {
            r.push_error(FieldError::new(
                r.loc_of("duplicate_id"),
                "value_error.contact.same",
                "the duplicate must be another contact than the primary",
            ));
            return None;
        }
        Some(MergeContacts { primary_id, duplicate_id })
    })
}

/// Prepares `q`: lower-cased text, plus its digits when it looks like a
/// phone number ("(415) 555" also matches "+14155550100").
pub fn search_terms(q: &str) -> SearchTerms {
    let text = q.trim().to_lowercase();
    let phone_like = text.chars().all(|c| c.is_ascii_digit() || " +-().".contains(c));
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let digits = (phone_like && !digits.is_empty() && digits != text).then_some(digits);
    SearchTerms { text, digits }
}

pub fn parse_filter(q: &mut QueryReader) -> ContactFilter {
    ContactFilter {
        q: q.string("q", 1, NAME_MAX).map(|s| search_terms(&s)),
        tag: q.string("tag", 1, TAG_MAX),
        origin: q.enum_value::<Origin>("origin"),
        updated_since: q.timestamp("updated_since"),
    }
}

// --- Use cases --------------------------------------------------------------

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Contact", id)
}

/// 409 unless `phone`, `email` and `identities` are free in the scope (or
/// already belong to contact `own`).
async fn check_unique(
    tx: &mut Tx,
    scope: Scope,
    own: Option<i64>,
    f: &ContactFields,
    ids: &[Identity],
) -> ServiceResult<()> {
    let taken = |other: Option<i64>| other.filter(|o| Some(*o) != own);
    if let Some(p) = &f.normalized_phone
        && let Some(other) = taken(repo::id_by_address(tx, scope, AddressColumn::Phone, p).await?)
    {
        return Err(ServiceError::Conflict(format!("Contact {other} already has the phone number {p}")));
    }
    if let Some(e) = &f.normalized_email
        && let Some(other) = taken(repo::id_by_address(tx, scope, AddressColumn::Email, e).await?)
    {
        return Err(ServiceError::Conflict(format!("Contact {other} already has the email {e}")));
    }
    for identity in ids {
        if let Some(other) = taken(repo::id_by_identity(tx, scope, identity).await?) {
            return Err(ServiceError::Conflict(format!(
                "Contact {other} already has the identity {}:{}",
                identity.channel, identity.address
            )));
        }
    }
    Ok(())
}

fn apply(f: &mut ContactFields, changes: ContactChanges) {
    if let Some(name) = changes.display_name {
        f.display_name = name;
    }
    if let Some(p) = changes.phone {
        f.normalized_phone = p;
    }
    if let Some(e) = changes.email {
        f.normalized_email = e;
    }
    if let Some(a) = changes.avatar_url {
        f.avatar_url = a;
    }
    if let Some(n) = changes.notes {
        f.notes = n;
    }
    if let Some(t) = changes.tags {
        f.tags = t;
    }
    if let Some(m) = changes.metadata {
        f.metadata = m;
    }
    if f.display_name.trim().is_empty() {
        f.display_name = f.normalized_email.clone().or_else(|| f.normalized_phone.clone()).unwrap_or_default();
    }
    f.canonical_name = canonical_name(&f.display_name);
}

async fn read(tx: &mut Tx, scope: Scope, id: i64) -> ServiceResult<Contact> {
    repo::get(tx, scope, id, false).await?.ok_or_else(|| not_found(id))
}

/// Creates a contact with `origin`; 409 if its phone, email or an identity is taken.
pub async fn create(tx: &mut Tx, scope: Scope, origin: Origin, changes: ContactChanges) -> ServiceResult<Contact> {
    let (fields, identities) = new_contact(origin, changes)?;
    check_unique(tx, scope, None, &fields, &identities).await?;
    insert_checked(tx, scope, &fields, identities).await
}

fn new_contact(origin: Origin, changes: ContactChanges) -> ServiceResult<(ContactFields, Vec<Identity>)> {
    let identities = changes.identities.clone().unwrap_or_default();
    let mut fields = ContactFields { origin: Some(origin), ..ContactFields::default() };
    apply(&mut fields, changes);
    if fields.display_name.is_empty() {
        return Err(ServiceError::Validation(vec![FieldError::missing(loc(&["body", "display_name"]))]));
    }
    Ok((fields, identities))
}

/// Inserts a contact whose phone, email and identities the caller has found
/// to be nobody else's in this transaction.
async fn insert_checked(
    tx: &mut Tx,
    scope: Scope,
    fields: &ContactFields,
    identities: Vec<Identity>,
) -> ServiceResult<Contact> {
    let contact = repo::insert(tx, scope, fields, &identities).await?;
    events::append(tx, scope, EventType::ContactCreated, event_data(&contact)?).await?;
    Ok(contact)
}

pub async fn get(svc: &Services, scope: Scope, id: ContactId) -> ServiceResult<Contact> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id, false).await?.ok_or_else(|| not_found(id))
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    filter: &ContactFilter,
    page: Page,
) -> ServiceResult<(Vec<Contact>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, filter, page).await?)
}

/// Applies `changes`; 409 if the new phone, email or an identity is another contact's.
pub async fn update(tx: &mut Tx, scope: Scope, id: ContactId, changes: ContactChanges) -> ServiceResult<Contact> {
    let id = id.get();
    let current = repo::get(tx, scope, id, true).await?.ok_or_else(|| not_found(id))?;
    // Writing the list back does not prove what it held unproven: an
    // identity the contact has unverified stays so.
    let new_identities = changes.identities.clone().map(|list| {
        list.into_iter()
            .map(|mut i| {
                i.unverified =
                    current.identities.iter().any(|c| c.unverified && c.channel == i.channel && c.address == i.address);
                i
            })
            .collect::<Vec<_>>()
    });
    let mut fields = ContactFields::from(&current);
    apply(&mut fields, changes);
    check_unique(tx, scope, Some(id), &fields, new_identities.as_deref().unwrap_or_default()).await?;
    repo::update(tx, scope, id, &fields).await?;
    if let Some(identities) = new_identities {
        repo::clear_identities(tx, scope, id).await?;
        for identity in &identities {
            repo::add_identity(tx, scope, id, identity).await?;
        }
    }
    let contact = read(tx, scope, id).await?;
    events::append(tx, scope, EventType::ContactUpdated, event_data(&contact)?).await?;
    Ok(contact)
}

/// What a contact may change about themselves through an agent's
/// `update_contact`: their name freely; their email or phone only to an
/// address they have proven (one of their identities on that channel, not
/// an unverified one), so that nobody writing to an agent can move a
/// customer's address to one of their own. A clash with another contact is
/// refused without naming it (the model would repeat it).
pub async fn update_as_contact(
    tx: &mut Tx,
    scope: Scope,
    id: ContactId,
    changes: ContactChanges,
) -> ServiceResult<Contact> {
    let id = id.get();
    let current = repo::get(tx, scope, id, true).await?.ok_or_else(|| not_found(id))?;
    let proven = |channels: &[&str], address: &str| {
        current
            .identities
            .iter()
            .any(|i| !i.unverified && channels.contains(&i.channel.as_str()) && i.address == address)
    };
    let refused = |what: &str| {
        ServiceError::Forbidden(format!(
            "The {what} can only be changed to one the contact has written from; a person from the team can change it"
        ))
    };
    if let Some(email) = &changes.email {
        let keeps = email.as_deref() == current.normalized_email.as_deref();
        if !keeps && !email.as_deref().is_some_and(|e| proven(&["email"], e)) {
            return Err(refused("email"));
        }
    }
    if let Some(phone) = &changes.phone {
        let keeps = phone.as_deref() == current.normalized_phone.as_deref();
        if !keeps && !phone.as_deref().is_some_and(|p| proven(&["sms", "whatsapp", "voice"], p)) {
            return Err(refused("phone number"));
        }
    }
    update(tx, scope, ContactId(id), changes).await.map_err(|e| match e {
        ServiceError::Conflict(_) => ServiceError::Conflict("Another contact already has that address".into()),
        other => other,
    })
}

/// Deletes a contact and its identities; its conversations stay, without a contact.
pub async fn delete(tx: &mut Tx, scope: Scope, id: ContactId) -> ServiceResult<()> {
    let id = id.get();
    if !repo::delete(tx, scope, id).await? {
        return Err(not_found(id));
    }
    conversations::clear_contact(tx, scope, id).await?;
    parley_store::repo::calls::clear_contact(tx, scope, id).await?;
    Ok(())
}

/// `POST /api/v1/contacts/discover`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"create": false}))]
pub struct Discover {
    /// Also create a `discovered` contact for each address (default false).
    #[schema(nullable = false)]
    pub create: Option<bool>,
}

pub fn parse_discover(body: Value) -> Parsed<Discover> {
    parse_object(body, loc(&["body"]), |r| Some(Discover { create: r.optional("create", boolean()) }))
}

/// An address seen in traffic that belongs to no contact.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiscoveredAddress {
    pub channel: ChannelType,
    pub address: String,
    /// The name the sender gave, if any.
    pub display_name_guess: Option<String>,
    pub conversation_count: i64,
    pub last_seen_at: parley_domain::Timestamp,
    /// The contact created for it (with `create: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact_id: Option<i64>,
    /// Present (true) on an email address claimed by an unverified sender:
    /// its contact gets it as an unverified identity.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schema(nullable = false)]
    pub unverified: bool,
}

/// The discovery answer: `{items, total}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Discovery {
    pub items: Vec<DiscoveredAddress>,
    pub total: i64,
}

/// Finds the addresses seen in conversations that belong to no contact;
/// with `create`, creates a `discovered` contact for each and links its
/// conversations to it, in the caller's transaction.
pub async fn discover(tx: &mut Tx, scope: Scope, config: &ContactsConfig, create: bool) -> ServiceResult<Discovery> {
    let mut items = Vec::new();
    for seen in conversations::unlinked_addresses(tx, scope).await? {
        let (channel, address) = seen
            .channel_ref
            .split_once(':')
            .and_then(|(channel, address)| Some((ChannelType::parse(channel)?, address)))
            .ok_or_else(|| parley_store::StoreError::Corrupt(format!("channel_ref {:?}", seen.channel_ref)))?;
        let mut item = DiscoveredAddress {
            channel,
            address: address.to_owned(),
            display_name_guess: seen.name_guess,
            conversation_count: seen.conversation_count,
            last_seen_at: seen.last_seen_at,
            contact_id: None,
            unverified: seen.unverified_sender,
        };
        if create {
            let identity =
                Identity { channel: item.channel, address: item.address.clone(), unverified: seen.unverified_sender };
            let always = ContactsConfig { auto_create: true, ..config.clone() };
            if let Some(contact) =
                resolve_address(tx, scope, &always, &identity, item.display_name_guess.as_deref()).await?
            {
                conversations::link_address(tx, scope, &seen.channel_ref, seen.unverified_sender, contact.id).await?;
                // A call's conversation is `voice:<number>`; the call names the number.
                if let Some(number) = seen.channel_ref.strip_prefix("voice:") {
                    parley_store::repo::calls::link_address(tx, scope, number, contact.id).await?;
                }
                item.contact_id = Some(contact.id);
            }
        }
        items.push(item);
    }
    Ok(Discovery { total: items.len() as i64, items })
}

/// Merges `duplicate` into `primary` in one transaction: the primary keeps
/// its values and takes the duplicate's where it has none (tags and
/// metadata keys are combined); identities and related records move to the
/// primary; the duplicate is deleted; `contact.merged` is emitted.
pub async fn merge(tx: &mut Tx, scope: Scope, input: MergeContacts) -> ServiceResult<Contact> {
    let primary = repo::get(tx, scope, input.primary_id, true).await?.ok_or_else(|| not_found(input.primary_id))?;
    let duplicate =
        repo::get(tx, scope, input.duplicate_id, true).await?.ok_or_else(|| not_found(input.duplicate_id))?;
    let mut fields = ContactFields::from(&primary);
    let other = ContactFields::from(&duplicate);
    fill(&mut fields.normalized_phone, other.normalized_phone);
    fill(&mut fields.normalized_email, other.normalized_email);
    fill(&mut fields.avatar_url, other.avatar_url);
    fill(&mut fields.notes, other.notes);
    fields.tags = clean_tags(fields.tags.into_iter().chain(other.tags));
    for (k, v) in other.metadata {
        fields.metadata.entry(k).or_insert(v);
    }
    // Records that point at a contact move with it. (Calls join this list
    // when their table arrives.)
    // (An unverified sender's identity and conversations stay apart: see
    // the repository functions.)
    repo::move_identities(tx, scope, duplicate.id, primary.id).await?;
    conversations::move_contact(tx, scope, duplicate.id, primary.id).await?;
    parley_store::repo::calls::move_contact(tx, scope, duplicate.id, primary.id).await?;
    // Deleting first frees the duplicate's phone and email for the primary.
    repo::delete(tx, scope, duplicate.id).await?;
    conversations::clear_contact(tx, scope, duplicate.id).await?;
    repo::update(tx, scope, primary.id, &fields).await?;
    let contact = read(tx, scope, primary.id).await?;
    let event = MergedEvent { primary_id: primary.id, duplicate_id: duplicate.id, contact: contact.clone() };
    events::append(tx, scope, EventType::ContactMerged, event_data(&event)?).await?;
    Ok(contact)
}

fn fill(target: &mut Option<String>, from: Option<String>) {
    if target.as_deref().is_none_or(str::is_empty) {
        *target = from;
    }
}

/// The contact column that holds an identity's address too (phone and
/// email channels): a contact with that number or email is its owner.
fn address_column(identity: &Identity) -> Option<AddressColumn> {
    match identity.channel.as_str() {
        "sms" | "whatsapp" | "voice" => Some(AddressColumn::Phone),
        "email" => Some(AddressColumn::Email),
        _ => None,
    }
}

/// Reads ahead, for a batch of inbound senders, which of them no contact
/// owns by identity or by address (a transaction's lookahead, see
/// `parley_store::Absences`), so that [`resolve_address`] looks up only
/// the ones that exist.
pub async fn look_ahead_senders(tx: &mut Tx, scope: Scope, senders: &[Identity]) -> parley_store::StoreResult<()> {
    for column in [AddressColumn::Phone, AddressColumn::Email] {
        let of_column: Vec<&str> = senders
            .iter()
            .filter(|i| !i.unverified && address_column(i) == Some(column))
            .map(|i| i.address.as_str())
            .collect();
        repo::look_ahead_addresses(tx, scope, column, &of_column).await?;
    }
    repo::look_ahead_identities(tx, scope, senders).await
}

/// The contact behind an inbound address on `channel`: the owner of that
/// identity; else, for phone and email channels, the contact with that
/// number or email (which then gains the identity); else, when
/// `contacts.auto_create` is on, a new `discovered` contact. `None` only
/// when auto-creation is off and nobody matches.
///
/// An unverified identity (an email `From` nobody vouched for) is only ever
/// its own contact's: found by that identity, or a new `discovered`
/// contact holding just it (without an `email`, which is a proven
/// address's), never the contact of the same address proven.
pub async fn resolve_address(
    tx: &mut Tx,
    scope: Scope,
    config: &ContactsConfig,
    identity: &Identity,
    name_guess: Option<&str>,
) -> ServiceResult<Option<Contact>> {
    if let Some(id) = repo::id_by_identity(tx, scope, identity).await? {
        return Ok(Some(read(tx, scope, id).await?));
    }
    let by_address = match address_column(identity).filter(|_| !identity.unverified) {
        Some(column) => repo::id_by_address(tx, scope, column, &identity.address).await?,
        None => None,
    };
    if let Some(id) = by_address {
        repo::add_identity(tx, scope, id, identity).await?;
        return Ok(Some(read(tx, scope, id).await?));
    }
    if !config.auto_create {
        return Ok(None);
    }
    let display_name = match name_guess.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => name.to_owned(),
        // A visitor's id is random: a person reads "Website visitor 0ZDv" better.
        None if identity.channel == ChannelType::Webchat => {
            let skip = identity.address.chars().count().saturating_sub(4);
            format!("Website visitor {}", identity.address.chars().skip(skip).collect::<String>())
        }
        None => identity.address.clone(),
    };
    let mut changes = ContactChanges {
        display_name: Some(display_name),
        identities: Some(vec![identity.clone()]),
        ..ContactChanges::default()
    };
    match identity.channel.as_str() {
        _ if identity.unverified => {}
        "sms" | "whatsapp" | "voice" => changes.phone = Some(Some(identity.address.clone())),
        "email" => changes.email = Some(Some(identity.address.clone())),
        _ => {}
    }
    // The lookups above are check_unique's for what this contact holds.
    let (fields, identities) = new_contact(Origin::Discovered, changes)?;
    insert_checked(tx, scope, &fields, identities).await.map(Some)
}
