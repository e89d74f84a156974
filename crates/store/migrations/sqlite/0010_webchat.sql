-- Webchat visitors: a browser keeps a secret token (only its hash is
-- stored) to come back as the same visitor, and so to the same conversation.

CREATE TABLE webchat_visitors (
    id           INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id),
    livemode     INTEGER NOT NULL,
    channel_id   INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
    -- The visitor's address on the channel (`webchat:<public_id>`).
    public_id    TEXT    NOT NULL UNIQUE,
    token_hash   TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);
CREATE INDEX webchat_visitors_channel ON webchat_visitors (channel_id);
