-- Handoffs between agents and humans. At most one is open (requested or
-- accepted) per conversation.

CREATE TABLE handoffs (
    id               INTEGER PRIMARY KEY,
    workspace_id     INTEGER NOT NULL REFERENCES workspaces(id),
    livemode         INTEGER NOT NULL,
    conversation_id  INTEGER NOT NULL REFERENCES conversations(id),
    target           TEXT    NOT NULL,
    agent_id         INTEGER,
    user_id          INTEGER,
    reason           TEXT    NOT NULL,
    note             TEXT,
    status           TEXT    NOT NULL,
    -- Who asked: `user`, `agent` or `system` (an API key), and the user's or agent's id.
    requested_by     TEXT    NOT NULL,
    requested_by_id  INTEGER,
    created_at       INTEGER NOT NULL,
    accepted_at      INTEGER,
    completed_at     INTEGER,
    canceled_at      INTEGER,
    updated_at       INTEGER NOT NULL
);
CREATE UNIQUE INDEX handoffs_open ON handoffs (conversation_id) WHERE status IN ('requested', 'accepted');
CREATE INDEX handoffs_list ON handoffs (workspace_id, livemode, created_at DESC, id DESC);
