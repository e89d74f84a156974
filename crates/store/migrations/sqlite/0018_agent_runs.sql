-- Agent runs: one per answer an agent gives (or fails to give). A run is
-- stored `queued` with the inbound message that calls for it, together
-- with its `agent.run` job; the job's handler streams the engine's answer
-- and writes the reply, the run's figures and the job's completion in one
-- transaction.

CREATE TABLE agent_runs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id    INTEGER NOT NULL REFERENCES workspaces(id),
    livemode        INTEGER NOT NULL,
    agent_id        INTEGER NOT NULL,
    conversation_id INTEGER,
    call_id         INTEGER,
    trigger         TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    engine          TEXT    NOT NULL,
    model           TEXT    NOT NULL,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_cents      INTEGER NOT NULL DEFAULT 0,
    first_token_ms  INTEGER,
    total_ms        INTEGER,
    reply_message_id INTEGER,
    tool_calls      TEXT    NOT NULL DEFAULT '[]',
    retrieval       TEXT    NOT NULL DEFAULT '[]',
    error           TEXT,
    created_at      INTEGER NOT NULL,
    completed_at    INTEGER
);
CREATE INDEX agent_runs_list ON agent_runs (workspace_id, livemode, created_at DESC, id DESC);
CREATE INDEX agent_runs_conversation ON agent_runs (workspace_id, livemode, conversation_id, status);
