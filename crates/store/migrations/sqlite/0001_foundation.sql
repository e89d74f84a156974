-- Foundation: workspaces, API keys, agents, triggers, prompt blocks, the event
-- log and idempotency records. Timestamps are INTEGER microseconds since the
-- Unix epoch (UTC). Every workspace-owned table carries workspace_id and livemode.

CREATE TABLE instance_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- A counter per (workspace, mode, resource kind), bumped in the transaction of
-- every write to that kind, so a cached list can be checked for freshness with
-- one indexed read, on every instance.
CREATE TABLE scope_versions (
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    resource     TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, livemode, resource)
);

CREATE TABLE workspaces (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL,
    voice_enabled INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id               INTEGER PRIMARY KEY,
    workspace_id     INTEGER NOT NULL REFERENCES workspaces(id),
    livemode         INTEGER NOT NULL,
    name             TEXT    NOT NULL,
    key_hash         TEXT    NOT NULL UNIQUE,
    hint             TEXT    NOT NULL,
    workspace_locked INTEGER NOT NULL DEFAULT 1,
    created_by       INTEGER,
    created_at       INTEGER NOT NULL,
    last_used_at     INTEGER,
    expires_at       INTEGER,
    revoked_at       INTEGER
);
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, livemode, created_at DESC, id DESC);

CREATE TABLE agents (
    id                       INTEGER PRIMARY KEY,
    workspace_id             INTEGER NOT NULL REFERENCES workspaces(id),
    livemode                 INTEGER NOT NULL,
    name                     TEXT    NOT NULL,
    slug                     TEXT    NOT NULL,
    description              TEXT,
    text_engine              TEXT    NOT NULL,
    status                   TEXT    NOT NULL,
    priority                 INTEGER NOT NULL DEFAULT 0,
    is_template              INTEGER NOT NULL DEFAULT 0,
    system_prompt            TEXT    NOT NULL DEFAULT '',
    first_message            TEXT,
    language                 TEXT    NOT NULL,
    voice                    TEXT,
    prompt_block_ids         TEXT    NOT NULL DEFAULT '[]',
    knowledge_collection_ids TEXT    NOT NULL DEFAULT '[]',
    handoff                  TEXT    NOT NULL,
    metadata                 TEXT    NOT NULL DEFAULT '{}',
    trigger_count            INTEGER NOT NULL DEFAULT 0,
    created_at               INTEGER NOT NULL,
    updated_at               INTEGER NOT NULL
);
CREATE UNIQUE INDEX agents_slug ON agents (workspace_id, livemode, slug);
CREATE INDEX agents_list ON agents (workspace_id, livemode, created_at DESC, id DESC);
-- Covers the list's COUNT(*) with its status and template filters.
CREATE INDEX agents_count ON agents (workspace_id, livemode, status, is_template);

CREATE TABLE agent_triggers (
    id           INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    agent_id     INTEGER NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    event        TEXT    NOT NULL,
    channel      TEXT    NOT NULL,
    kind         TEXT,
    pattern      TEXT,
    pattern_type TEXT    NOT NULL,
    enabled      INTEGER NOT NULL DEFAULT 1,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX agent_triggers_agent ON agent_triggers (workspace_id, livemode, agent_id, id);

CREATE TABLE prompt_blocks (
    id           INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id),
    livemode     INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    slug         TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    variables    TEXT    NOT NULL DEFAULT '[]',
    version      INTEGER NOT NULL DEFAULT 1,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX prompt_blocks_slug ON prompt_blocks (workspace_id, livemode, slug);
CREATE INDEX prompt_blocks_list ON prompt_blocks (workspace_id, livemode, created_at DESC, id DESC);

CREATE TABLE prompt_block_versions (
    id           INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    block_id     INTEGER NOT NULL REFERENCES prompt_blocks(id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    variables    TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    UNIQUE (block_id, version)
);

CREATE TABLE events (
    id           TEXT    PRIMARY KEY,
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    type         TEXT    NOT NULL,
    data         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX events_list ON events (workspace_id, livemode, created_at DESC, id DESC);

CREATE TABLE idempotency_keys (
    workspace_id    INTEGER NOT NULL,
    livemode        INTEGER NOT NULL,
    key             TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    response_status INTEGER,
    response_body   TEXT,
    locked_until    INTEGER,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, livemode, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
