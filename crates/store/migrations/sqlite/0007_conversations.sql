-- Conversations (one open per channel connection and address) and their
-- messages. Inbound messages are deduplicated by the provider's id.

CREATE TABLE conversations (
    id                   INTEGER PRIMARY KEY,
    workspace_id         INTEGER NOT NULL REFERENCES workspaces(id),
    livemode             INTEGER NOT NULL,
    channel_id           INTEGER NOT NULL REFERENCES channels(id),
    channel              TEXT    NOT NULL,
    kind                 TEXT    NOT NULL,
    channel_ref          TEXT    NOT NULL,
    title                TEXT    NOT NULL,
    status               TEXT    NOT NULL,
    contact_id           INTEGER,
    -- The name the sender gave, for contacts discovered later.
    sender_name          TEXT,
    agent_id             INTEGER,
    handler              TEXT    NOT NULL,
    assignee_user_id     INTEGER,
    waiting_since        INTEGER,
    snoozed_until        INTEGER,
    last_message_ts      INTEGER,
    last_message_preview TEXT,
    unread_count         INTEGER NOT NULL DEFAULT 0,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
);
CREATE UNIQUE INDEX conversations_open ON conversations (workspace_id, livemode, channel_id, channel_ref) WHERE status <> 'closed';
CREATE INDEX conversations_list ON conversations (workspace_id, livemode, created_at DESC, id DESC);
CREATE INDEX conversations_contact ON conversations (workspace_id, livemode, contact_id);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    workspace_id    INTEGER NOT NULL,
    livemode        INTEGER NOT NULL,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    channel_id      INTEGER NOT NULL,
    direction       TEXT    NOT NULL,
    author_type     TEXT    NOT NULL,
    author_id       INTEGER,
    text            TEXT    NOT NULL,
    attachments     TEXT    NOT NULL DEFAULT '[]',
    status          TEXT    NOT NULL,
    error           TEXT,
    external_id     TEXT,
    created_at      INTEGER NOT NULL,
    sent_at         INTEGER,
    delivered_at    INTEGER,
    read_at         INTEGER
);
CREATE INDEX messages_conversation ON messages (conversation_id, id);
CREATE UNIQUE INDEX messages_inbound_external ON messages (channel_id, external_id) WHERE direction = 'inbound' AND external_id IS NOT NULL;
