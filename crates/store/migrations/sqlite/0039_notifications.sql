-- What a member is told: a handoff waiting for a person, a mention in a
-- note, a conversation assigned to them. Read in the dashboard's bell.
CREATE TABLE notifications (
    id              INTEGER PRIMARY KEY,
    workspace_id    INTEGER NOT NULL REFERENCES workspaces(id),
    livemode        INTEGER NOT NULL,
    user_id         INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    conversation_id INTEGER NOT NULL,
    actor_user_id   INTEGER,
    text            TEXT    NOT NULL,
    read_at         INTEGER,
    created_at      INTEGER NOT NULL
);
CREATE INDEX notifications_user ON notifications (workspace_id, livemode, user_id, created_at DESC, id DESC);
