-- Messages no longer lock a counter row: each one appends its delta to
-- `message_count_deltas` (no unique key, so no writer ever waits on
-- another), and housekeeping folds the deltas into `message_counts` in one
-- statement, one instance at a time (an advisory lock). Before, a deferred
-- trigger upserted one of 16 shard rows at commit, and two transactions
-- spanning the same two scopes in opposite orders could deadlock, failing
-- a whole group commit. Readers sum both tables (`message_count_totals`);
-- a fold deletes its deltas and adds their sum in one transaction, so a
-- reader sees each message once.
CREATE TABLE message_count_deltas (
    workspace_id BIGINT      NOT NULL,
    livemode     BOOLEAN     NOT NULL,
    bucket_start TIMESTAMPTZ NOT NULL,
    inbound      INTEGER     NOT NULL,
    outbound     INTEGER     NOT NULL
);
CREATE INDEX message_count_deltas_scope ON message_count_deltas (workspace_id, livemode, bucket_start);

DROP TRIGGER messages_count ON messages;
DROP FUNCTION message_counts_add();

CREATE FUNCTION message_count_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_count_deltas (workspace_id, livemode, bucket_start, inbound, outbound)
    VALUES (NEW.workspace_id, NEW.livemode, to_timestamp(floor(extract(epoch FROM NEW.created_at) / 900) * 900),
            CASE WHEN NEW.direction = 'inbound' THEN 1 ELSE 0 END,
            CASE WHEN NEW.direction = 'outbound' THEN 1 ELSE 0 END);
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_count AFTER INSERT ON messages
    FOR EACH ROW WHEN (NEW.direction IN ('inbound', 'outbound'))
    EXECUTE FUNCTION message_count_delta();

CREATE VIEW message_count_totals AS
    SELECT workspace_id, livemode, bucket_start, inbound, outbound FROM message_counts
    UNION ALL
    SELECT workspace_id, livemode, bucket_start, inbound, outbound FROM message_count_deltas;
