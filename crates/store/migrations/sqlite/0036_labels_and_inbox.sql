-- Labels on conversations, and the indexes the inbox's views read.
CREATE TABLE labels (
    id           INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id),
    livemode     INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    -- `#rrggbb`.
    color        TEXT    NOT NULL,
    description  TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
-- Names are unique in a scope whatever their case (`VIP` is `vip`).
CREATE UNIQUE INDEX labels_name ON labels (workspace_id, livemode, lower(name));

CREATE TABLE conversation_labels (
    workspace_id    INTEGER NOT NULL,
    livemode        INTEGER NOT NULL,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    label_id        INTEGER NOT NULL REFERENCES labels(id),
    PRIMARY KEY (conversation_id, label_id)
);
CREATE INDEX conversation_labels_label ON conversation_labels (label_id, conversation_id);

-- The names of a conversation's labels, sorted (JSON), kept with it so that
-- reading a conversation costs no join; `conversation_labels` filters.
ALTER TABLE conversations ADD COLUMN labels TEXT NOT NULL DEFAULT '[]';

-- The inbox sorts by last activity or by how long the contact has waited.
CREATE INDEX conversations_recent ON conversations (workspace_id, livemode, last_message_ts DESC, id DESC);
-- Waiting longest first, those not waiting last: SQLite sorts NULL first,
-- so the order (and this index) puts them at the largest integer.
CREATE INDEX conversations_waiting ON conversations (workspace_id, livemode, COALESCE(waiting_since, 9223372036854775807), id);
CREATE INDEX conversations_assignee ON conversations (workspace_id, livemode, assignee_user_id, last_message_ts DESC)
    WHERE assignee_user_id IS NOT NULL;
-- The handoffs waiting for a person.
CREATE INDEX handoffs_requested ON handoffs (workspace_id, livemode, created_at) WHERE status = 'requested';
