-- Voice calls, their transcript segments, and which instance runs each
-- live call (so a restarted instance can end the calls it lost).

CREATE TABLE calls (
    id                    INTEGER PRIMARY KEY,
    public_id             TEXT    NOT NULL UNIQUE,
    workspace_id          INTEGER NOT NULL REFERENCES workspaces(id),
    livemode              INTEGER NOT NULL,
    agent_id              INTEGER NOT NULL,
    contact_id            INTEGER,
    conversation_id       INTEGER,
    direction             TEXT    NOT NULL,
    from_address          TEXT,
    to_address            TEXT    NOT NULL,
    status                TEXT    NOT NULL,
    ended_reason          TEXT,
    first_message         TEXT,
    variables             TEXT    NOT NULL DEFAULT '{}',
    max_duration_s        INTEGER NOT NULL,
    record                INTEGER NOT NULL,
    metadata              TEXT    NOT NULL DEFAULT '{}',
    provider              TEXT    NOT NULL,
    provider_call_id      TEXT,
    -- The instance running the call while it is live.
    owner                 TEXT,
    -- Renewed while the owner runs the call; a call not seen for a lease
    -- period lost its owner (a crash) and is ended as failed.
    last_seen_at          INTEGER,
    created_at            INTEGER NOT NULL,
    ringing_at            INTEGER,
    answered_at           INTEGER,
    ended_at              INTEGER,
    duration_ms           INTEGER,
    cost_cents            INTEGER,
    recording_status      TEXT    NOT NULL DEFAULT 'absent',
    recording_key         TEXT,
    recording_duration_ms INTEGER,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX calls_list ON calls (workspace_id, livemode, created_at DESC, id DESC);
CREATE INDEX calls_live ON calls (workspace_id, livemode, status) WHERE status IN ('queued', 'ringing', 'in_progress');
CREATE INDEX calls_owner ON calls (owner) WHERE owner IS NOT NULL;

CREATE TABLE call_segments (
    id           INTEGER PRIMARY KEY,
    call_id      INTEGER NOT NULL REFERENCES calls(id),
    idx          INTEGER NOT NULL,
    speaker      TEXT    NOT NULL,
    text         TEXT    NOT NULL,
    start_ms     INTEGER NOT NULL,
    end_ms       INTEGER NOT NULL,
    interrupted  INTEGER NOT NULL
);
CREATE UNIQUE INDEX call_segments_order ON call_segments (call_id, idx);

-- A call's conversation is its own (one per call), so calls are left out of
-- the one-open-conversation-per-address rule.
DROP INDEX conversations_open;
CREATE UNIQUE INDEX conversations_open ON conversations (workspace_id, livemode, channel_id, channel_ref) WHERE status <> 'closed' AND kind <> 'call';
