-- Users, their workspace memberships, JWT signing keys and refresh tokens.

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    email         TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE memberships (
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    role         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (user_id, workspace_id)
);
CREATE INDEX memberships_workspace ON memberships (workspace_id);

-- HS256 secrets, sealed with the master key. The newest active one signs;
-- every one not yet deleted verifies, so rotation logs nobody out.
CREATE TABLE signing_keys (
    kid           TEXT    PRIMARY KEY,
    sealed_secret TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    retired_at    INTEGER
);

-- Refresh tokens, stored as SHA-256. Each rotation adds a row to the token's
-- family; presenting an already-rotated token revokes the whole family.
CREATE TABLE refresh_tokens (
    id           INTEGER PRIMARY KEY,
    token_hash   TEXT    NOT NULL UNIQUE,
    family_id    TEXT    NOT NULL,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    rotated_at   INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
