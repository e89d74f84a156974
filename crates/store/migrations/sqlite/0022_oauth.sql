-- OAuth 2.1 for the MCP endpoint: Parley is the authorization server.

-- Clients: registered dynamically (RFC 7591), or described by a Client ID
-- Metadata Document (the client id is the document's HTTPS URL; the row is
-- a cache of it until `expires_at`).
CREATE TABLE oauth_clients (
    id            INTEGER PRIMARY KEY,
    client_id     TEXT    NOT NULL UNIQUE,
    client_name   TEXT    NOT NULL,
    client_uri    TEXT,
    redirect_uris TEXT    NOT NULL,
    auth_method   TEXT    NOT NULL,
    secret_hash   TEXT,
    source        TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER
);

-- What a user consented to: one client, one workspace and mode, scopes.
-- Revoking it ends every token issued under it.
CREATE TABLE oauth_grants (
    id               INTEGER PRIMARY KEY,
    user_id          INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    client_id        TEXT    NOT NULL,
    client_name      TEXT    NOT NULL,
    workspace_id     INTEGER NOT NULL,
    livemode         INTEGER NOT NULL,
    workspace_locked INTEGER NOT NULL,
    scope            TEXT    NOT NULL,
    resource         TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    last_used_at     INTEGER,
    revoked_at       INTEGER
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_id, id);

-- Authorization codes (SHA-256), single use and short-lived.
CREATE TABLE oauth_codes (
    id             INTEGER PRIMARY KEY,
    code_hash      TEXT    NOT NULL UNIQUE,
    grant_id       INTEGER NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    redirect_uri   TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER
);

-- Access and refresh tokens (SHA-256). A refresh token presented after it
-- was rotated revokes its grant.
CREATE TABLE oauth_tokens (
    id         INTEGER PRIMARY KEY,
    token_hash TEXT    NOT NULL UNIQUE,
    grant_id   INTEGER NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    kind       TEXT    NOT NULL,
    scope      TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    rotated_at INTEGER
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);
