-- The home page's messages per day, kept as they are written: inbound and
-- outbound counts per scope and quarter hour (every real UTC offset is a
-- whole number of quarter hours, so any reader's day is a run of buckets).
-- Counting a busy week's ~250,000 index entries cost ~46 ms per read;
-- summing its buckets costs well under one.
--
-- A bucket has 16 rows (`shard`, the writing transaction's id mod 16), so
-- concurrent transactions rarely wait on each other's row lock, and the
-- trigger is deferred to commit, so that lock is held for the commit
-- alone. One transaction writes one shard: a transaction whose messages
-- are all in one scope and quarter hour (nearly every one) locks a single
-- row and cannot deadlock; two that each span the same two scopes in
-- opposite orders (multi-workspace batches, on two instances, in the same
-- shard) still can. (The migration's own count uses the id: any spread is
-- a valid one.)
-- Messages are only ever inserted: a path that deletes one or changes its
-- created_at or direction must adjust these counts too.
CREATE TABLE message_counts (
    workspace_id BIGINT      NOT NULL,
    livemode     BOOLEAN     NOT NULL,
    bucket_start TIMESTAMPTZ NOT NULL,
    shard        SMALLINT    NOT NULL,
    inbound      BIGINT      NOT NULL,
    outbound     BIGINT      NOT NULL,
    PRIMARY KEY (workspace_id, livemode, bucket_start, shard)
);

CREATE FUNCTION message_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_counts AS c (workspace_id, livemode, bucket_start, shard, inbound, outbound)
    VALUES (NEW.workspace_id, NEW.livemode, to_timestamp(floor(extract(epoch FROM NEW.created_at) / 900) * 900),
            txid_current() % 16, CASE WHEN NEW.direction = 'inbound' THEN 1 ELSE 0 END,
            CASE WHEN NEW.direction = 'outbound' THEN 1 ELSE 0 END)
    ON CONFLICT (workspace_id, livemode, bucket_start, shard)
    DO UPDATE SET inbound = c.inbound + EXCLUDED.inbound, outbound = c.outbound + EXCLUDED.outbound;
    RETURN NULL;
END
$$;

-- Messages written while this runs wait for it, so none is counted twice
-- or missed; the messages already there are counted once here.
LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO message_counts (workspace_id, livemode, bucket_start, shard, inbound, outbound)
SELECT workspace_id, livemode, to_timestamp(floor(extract(epoch FROM created_at) / 900) * 900), id % 16,
       COUNT(*) FILTER (WHERE direction = 'inbound'), COUNT(*) FILTER (WHERE direction = 'outbound')
FROM messages WHERE direction IN ('inbound', 'outbound') GROUP BY 1, 2, 3, 4;

CREATE CONSTRAINT TRIGGER messages_count AFTER INSERT ON messages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.direction IN ('inbound', 'outbound'))
    EXECUTE FUNCTION message_counts_add();
