-- Channel-specific facts of a message (SMS segments, a WhatsApp template).
ALTER TABLE messages ADD COLUMN details JSONB NOT NULL DEFAULT '{}';

-- Addresses that asked a channel to stop writing to them (an SMS "STOP");
-- removed when they write "START".
CREATE TABLE channel_opt_outs (
    workspace_id BIGINT      NOT NULL,
    livemode     BOOLEAN     NOT NULL,
    channel_id   BIGINT      NOT NULL,
    address      TEXT        NOT NULL,
    keyword      TEXT        NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (channel_id, address)
);
