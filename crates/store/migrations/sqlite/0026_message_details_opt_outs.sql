-- Channel-specific facts of a message (SMS segments, a WhatsApp template).
ALTER TABLE messages ADD COLUMN details TEXT NOT NULL DEFAULT '{}';

-- Addresses that asked a channel to stop writing to them (an SMS "STOP");
-- removed when they write "START".
CREATE TABLE channel_opt_outs (
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    channel_id   INTEGER NOT NULL,
    address      TEXT    NOT NULL,
    keyword      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (channel_id, address)
);
