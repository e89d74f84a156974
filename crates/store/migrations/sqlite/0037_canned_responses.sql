-- Canned responses: the team's saved replies, picked in the composer by
-- their short code.
CREATE TABLE canned_responses (
    id           INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id),
    livemode     INTEGER NOT NULL,
    short_code   TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX canned_responses_code ON canned_responses (workspace_id, livemode, lower(short_code));
