-- A conversation's latest analysis, asked for on demand
-- (POST /api/v1/conversations/{id}/analysis); a call's is on the call.
CREATE TABLE conversation_analyses (
    conversation_id BIGINT  PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    workspace_id    BIGINT  NOT NULL,
    livemode        BOOLEAN NOT NULL,
    analysis        JSONB   NOT NULL
);
