-- The durable queue of outbound messages. A message is queued in the same
-- transaction that stores it, so an accepted message survives a crash; the
-- row leaves the queue when the message is sent or has failed for good.
-- Messages of one conversation go out in order: a row waits while an
-- earlier row of its conversation is queued.

CREATE TABLE outbound_queue (
    message_id      BIGINT PRIMARY KEY REFERENCES messages(id),
    workspace_id    BIGINT  NOT NULL,
    livemode        BOOLEAN NOT NULL,
    conversation_id BIGINT  NOT NULL,
    channel_id      BIGINT  NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    -- The instance sending it now, until when (a crashed holder's lease lapses).
    leased_by       TEXT,
    lease_until     TIMESTAMPTZ,
    last_error      TEXT
);
CREATE INDEX outbound_queue_due ON outbound_queue (next_attempt_at);
CREATE INDEX outbound_queue_conversation ON outbound_queue (conversation_id, message_id);

-- Delivery status callbacks find outbound messages by the provider's id.
CREATE INDEX messages_outbound_external ON messages (channel_id, external_id) WHERE direction = 'outbound' AND external_id IS NOT NULL;
