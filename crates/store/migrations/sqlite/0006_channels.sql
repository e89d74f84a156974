-- Channel connections. Settings are split: `config` holds the readable ones;
-- secret ones (and the api channel's signing secret) are sealed with the
-- master key and never returned.

CREATE TABLE channels (
    id                     INTEGER PRIMARY KEY,
    workspace_id           INTEGER NOT NULL REFERENCES workspaces(id),
    livemode               INTEGER NOT NULL,
    type                   TEXT    NOT NULL,
    name                   TEXT    NOT NULL,
    -- Unguessable, global: names the channel in public URLs (/webchat/{public_id}).
    public_id              TEXT    NOT NULL UNIQUE,
    address                TEXT    NOT NULL,
    status                 TEXT    NOT NULL,
    config                 TEXT    NOT NULL DEFAULT '{}',
    secret_names           TEXT    NOT NULL DEFAULT '[]',
    sealed_secrets         TEXT,
    sealed_signing_secret  TEXT,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
);
CREATE INDEX channels_list ON channels (workspace_id, livemode, created_at DESC, id DESC);
