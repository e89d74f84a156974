"""Schemathesis hooks for Parley's OpenAPI document: the allow-list.

1. Rules JSON Schema cannot state (`ALLOWED_422`). A schema-valid request
   may still be refused, with a 422, by a rule that depends on stored data
   or on two values together. Such a refusal is accepted only when *every*
   fault in the 422 body has one of the types listed below, each with its
   reason; any other 422 to schema-valid data still fails the run.

2. String formats of Parley's own, where the server checks more than a JSON
   Schema keyword can say. Each is registered with a strategy that draws
   values the server accepts, so that generated cases reach past validation:

- `phone`: a phone number in any common format (libphonenumber decides);
- `phone-or-sip`: the same, or a `sip:` URI (call destinations);
- `search-query`: the search syntax (words, "phrases", -exclusions, prefix*)
  with at least one term to look for;
- `event-types`: event types and families (`message.*`), comma-separated.
"""

import atexit
import collections
import json
import re

import schemathesis
from hypothesis import strategies as st

# Valid numbers in several regions and written forms; 555-01xx are the
# fictional North American numbers libphonenumber accepts.
_phone = st.one_of(
    st.integers(min_value=100, max_value=199).map(lambda n: f"+1415555{n:04d}"),
    st.integers(min_value=100, max_value=199).map(lambda n: f"(212) 555-0{n}"),
    st.sampled_from(["+44 20 7946 0958", "+49 30 901820", "+33 1 42 68 53 00", "tel:+1-415-555-0100"]),
)
_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzéü0123456789", min_size=1, max_size=12)
_term = st.one_of(
    _word,
    _word.map(lambda w: w + "*"),
    st.lists(_word, min_size=1, max_size=3).map(lambda ws: '"' + " ".join(ws) + '"'),
)
_query = st.tuples(
    st.lists(_term, min_size=1, max_size=4),
    st.lists(_word.map(lambda w: "-" + w), max_size=2),
).map(lambda parts: " ".join(parts[0] + parts[1]))

schemathesis.openapi.format("phone", _phone)
schemathesis.openapi.format(
    "phone-or-sip",
    st.one_of(_phone, _word.map(lambda w: f"sip:{w}@example.com")),
)
schemathesis.openapi.format("search-query", _query)

# The live stream's `types`: event types and families, comma-separated
# (a sample of each; the server checks them against its list).
_event_type = st.sampled_from(
    ["message.received", "message.sent", "conversation.updated", "handoff.requested", "call.completed",
     "message.*", "call.*", "handoff.*", "contact.*", "*"]
)
schemathesis.openapi.format("event-types", st.lists(_event_type, min_size=1, max_size=4).map(",".join))

# A contact import: a header of known columns, then rows a contact can be
# made of (a name, a phone number or an email each).
_csv_row = st.tuples(
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz ", min_size=1, max_size=20),
    st.integers(min_value=100, max_value=199),
).map(lambda r: f"{r[0].strip() or 'Ana'},+1415555{r[1]:04d}")
schemathesis.openapi.format(
    "contacts-csv",
    st.lists(_csv_row, max_size=5).map(lambda rows: "display_name,phone\n" + "".join(r + "\n" for r in rows)),
)


ALLOWED_422 = {
    # NUL cannot be stored (PostgreSQL refuses it), so every string refuses
    # it (docs/api.md). Generation is told `allow-x00 = false`, but the
    # coverage phase still puts NUL into strings nested in arrays.
    "value_error.string.nul": "a string holds NUL",
    # Ids in request bodies must name resources of the caller's workspace and
    # mode (agents, contacts, conversations, channels, users, prompt blocks,
    # templates, knowledge collections); a generic client draws them at random.
    "value_error.not_found": "a referenced id names nothing in the workspace",
    # Phone numbers are parsed by libphonenumber: a string of the right length
    # is not necessarily a number anywhere.
    "value_error.phone": "not a phone number by libphonenumber's rules",
    # An API key's `expires_at` must lie in the future.
    "value_error.datetime.past": "a key cannot be created already expired",
    # A phone call needs `to`; a web call (`transport: web`) takes neither
    # `to` nor `from`: the schema cannot tie one field's presence to another's value.
    "value_error.call.transport": "to and transport disagree",
    # A merge needs two different contacts.
    "value_error.contact.same": "primary_id and duplicate_id name the same contact",
    # Search pages stop at the 10,000th result: offset + limit <= 10,000.
    "value_error.search.window": "offset and limit together pass 10,000",
    # Emails are normalised with IDNA and held to DNS's lengths (labels of
    # at most 63 characters, 254 in all), stricter than the `email` format.
    "value_error.email": "not an address by the normaliser's rules",
    # Rules between two fields, or between a field and stored data:
    # placeholders in a prompt block's content must be declared in its
    # variables (and the content be a well-formed template);
    "value_error.template": "a {{placeholder}} not declared in variables, or a malformed template",
    # a trigger's pattern must compile when its pattern_type is regex;
    "value_error.regex": "a pattern that is not a regular expression, with pattern_type regex",
    # voicemail.message goes with action leave_message (agents and calls);
    "value_error.voicemail.message": "voicemail.message missing for leave_message, or sent with hang_up",
    # an agent's end_of_turn_max_ms is not below its end_of_turn_min_ms
    # (either sent, or stored);
    "value_error.turn.max_below_min": "end_of_turn_max_ms below end_of_turn_min_ms",
    # snoozed_until goes with status snoozed;
    "value_error.conversation.not_snoozed": "snoozed_until without status snoozed",
    # a message to a contact on a channel type needs an active channel of
    # that type, and the contact's address there.
    "value_error.channel.none_active": "the workspace has no active channel of that type",
    "value_error.contact.no_address": "the contact has no address on that channel",
    # a text the channel's provider would refuse (over Twilio's 1,600
    # characters on sms/whatsapp) depends on the channel it goes to.
    "value_error.text.channel_limit": "a text longer than the channel's provider takes",
    # A template goes only to WhatsApp channels, and outside WhatsApp's
    # 24-hour window only a template may be sent: both depend on the channel
    # and on when the contact last wrote.
    "value_error.template.channel": "a template to a channel type that sends none",
    "value_error.template.required": "free text outside WhatsApp's 24-hour window",
    # A subject goes only to email channels: it depends on the channel.
    "value_error.subject.channel": "a subject to a channel type that has none",
    # Accepting a handoff with an API key must name the user (a signed-in
    # person accepts for themselves): the rule depends on the caller.
    "value_error.user.required_with_key": "an API key accepts a handoff without user_id",
    # Outbound URLs (webhooks, api channels, avatars) must resolve to public
    # addresses; a generated URL may name this very server.
    "value_error.url.private": "the URL leads to a private address (SSRF guard)",
    # An agent's tools have unique names (uniqueness by a property is beyond
    # JSON Schema), and an HTTP tool's `parameters` must itself be a valid
    # JSON Schema of an object.
    "value_error.tool.duplicate": "two of an agent's tools share a name",
    "value_error.json_schema": "a tool's parameters are not a valid JSON Schema of an object",
    # An HTTP tool's header names are HTTP tokens other than the ones Parley
    # sets itself (content-type, webhook-*), a rule on property names.
    "value_error.header.name": "not a header name Parley may send",
    # The playground takes `messages` or `conversation_id`, exactly one, and
    # `messages` end with the user's turn.
    "value_error.chat.missing": "neither messages nor conversation_id",
    "value_error.chat.both": "both messages and conversation_id",
    "value_error.chat.last": "the last message is not the user's",
}

# Faults allowed only at one place: (method, path, loc prefix, type).
ALLOWED_422_AT = [
    # A channel's settings depend on its type, which a PATCH body does not
    # carry: the document offers every type's settings there.
    ("PATCH", "/api/v1/channels/{channel_id}", ["body", "config"], "value_error.extra"),
    # Label names are one whatever their case ("vip" and "VIP" are the same
    # label), which JSON Schema's uniqueItems cannot say.
    ("PUT", "/api/v1/conversations/{conversation_id}/labels", ["body", "labels"], "value_error.list.unique_items"),
    # The inbox's Mine view is the signed-in member's: an API key is nobody.
    ("GET", "/api/v1/inbox/conversations", ["query", "view"], "value_error.view"),
]


def _allowed(fault, method, path):
    if fault.get("type") in ALLOWED_422:
        return True
    loc = fault.get("loc", [])
    return any(
        (method, path, fault.get("type")) == (m, p, t) and loc[: len(prefix)] == prefix
        for m, p, prefix, t in ALLOWED_422_AT
    )


# The OAuth endpoints answer in OAuth's shape (RFC 6749 §5.2): a 400 with
# an `error` code (JSON), or the same code as `data-error` on the
# authorization pages. Allowed for schema-valid data only for:
ALLOWED_OAUTH_400 = {
    # a client id must name a registered client (or a metadata document
    # that can be fetched); a generic client draws them at random;
    "invalid_client": "the client id names no registered client",
    # codes and refresh tokens name stored grants;
    "invalid_grant": "the code or refresh token names nothing",
    # which parameters are required depends on grant_type, and a client
    # authenticates in the form or with HTTP Basic (a header): either;
    "invalid_request": "a parameter the grant type needs, or client authentication, is missing",
    # a redirect URI must be https, http on a loopback host, or a
    # private-use scheme (RFC 8252), and match a registered one.
    "invalid_redirect_uri": "not a redirect URI OAuth allows, or not one the client registered",
    # RFC 8707: a `resource` must name this server's MCP endpoint, whose
    # URL (the server's public address) a generic client cannot know.
    "invalid_target": "the resource names another server than this MCP endpoint",
}


def _oauth_error(response):
    text = response.content.decode("utf-8", "replace")
    try:
        return json.loads(text).get("error")
    except (ValueError, AttributeError):
        found = re.search(r'data-error="([a-z_]+)"', text)
        return found.group(1) if found else None


@schemathesis.hook
def filter_failure(ctx, failure, case, response):
    """Keeps every failure except a 422 to schema-valid data whose faults
    are all allowed above, an OAuth 400 allowed above, and one tool quirk
    (below)."""
    if getattr(failure, "code", None) != "ST202":
        return True
    if response.status_code == 400 and case.operation.path.startswith("/oauth/"):
        error = _oauth_error(response)
        if error in ALLOWED_OAUTH_400:
            DROPPED[f"oauth:{error}"] += 1
            return False
        return True
    if response.status_code != 422:
        return True
    # Stateful runs follow links from response fields to path parameters,
    # and a null field (a call without a contact, say) becomes the text
    # "None": not an id, so not schema-valid data.
    if any(v is None or v == "None" for v in (case.path_parameters or {}).values()):
        return False
    try:
        faults = json.loads(response.content)["detail"]
    except (ValueError, KeyError, TypeError):
        return True
    method, path = case.operation.method.upper(), case.operation.path
    if faults and all(_allowed(f, method, path) for f in faults):
        for fault in faults:
            DROPPED[fault.get("type")] += 1
        return False
    return True


# What the allow-list dropped, by fault type: printed at the end of a run.
DROPPED = collections.Counter()


@atexit.register
def _report():
    if DROPPED:
        counts = ", ".join(f"{t} {n}" for t, n in DROPPED.most_common())
        print(f"allow-list: 422s (and OAuth 400s) to schema-valid data accepted by rule: {counts}")
