-- A conversation's latest analysis, asked for on demand
-- (POST /api/v1/conversations/{id}/analysis); a call's is on the call.
CREATE TABLE conversation_analyses (
    conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    workspace_id    INTEGER NOT NULL,
    livemode        INTEGER NOT NULL,
    analysis        TEXT    NOT NULL
);
