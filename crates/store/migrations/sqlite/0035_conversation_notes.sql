-- Private notes on a conversation: written by members (or an API key) for
-- each other, never sent on a channel and never given to an agent.
CREATE TABLE conversation_notes (
    id              INTEGER PRIMARY KEY,
    workspace_id    INTEGER NOT NULL REFERENCES workspaces(id),
    livemode        INTEGER NOT NULL,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    -- NULL when written with an API key.
    author_user_id  INTEGER,
    text            TEXT    NOT NULL,
    -- The members the text @mentions (user ids, JSON).
    mentions        TEXT    NOT NULL DEFAULT '[]',
    created_at      INTEGER NOT NULL
);
CREATE INDEX conversation_notes_thread ON conversation_notes (workspace_id, livemode, conversation_id, created_at, id);
