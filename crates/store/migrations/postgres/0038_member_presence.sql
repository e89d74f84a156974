-- Members' availability in a workspace, from the dashboard's heartbeat:
-- online or away while it beats, offline once it stops.
CREATE TABLE member_presence (
    workspace_id BIGINT      NOT NULL REFERENCES workspaces(id),
    user_id      BIGINT      NOT NULL,
    status       TEXT        NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);
