-- Delivery reports that arrived before Parley recorded the provider's id
-- of the message they name (a provider can call back before its answer to
-- the send is stored). Applied, then removed, when that id is recorded;
-- purged after a day.
CREATE TABLE early_status_reports (
    id           BIGSERIAL   PRIMARY KEY,
    workspace_id BIGINT      NOT NULL,
    livemode     BOOLEAN     NOT NULL,
    channel_id   BIGINT      NOT NULL,
    external_id  TEXT        NOT NULL,
    status       TEXT        NOT NULL,
    error        TEXT,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX early_status_reports_message ON early_status_reports (channel_id, external_id);
