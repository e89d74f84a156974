-- The home page's messages per day, kept as they are written: inbound and
-- outbound counts per scope and quarter hour (every real UTC offset is a
-- whole number of quarter hours, so any reader's day is a run of buckets).
-- Counting a busy week's ~250,000 index entries cost ~20 ms per read;
-- summing its buckets costs well under one. One writer at a time: one row
-- per bucket (`shard` 0; PostgreSQL spreads a bucket over 16).
-- Messages are only ever inserted: a path that deletes one or changes its
-- created_at or direction must adjust these counts too.
CREATE TABLE message_counts (
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
    shard        INTEGER NOT NULL,
    inbound      INTEGER NOT NULL,
    outbound     INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, livemode, bucket_start, shard)
) WITHOUT ROWID;

INSERT INTO message_counts (workspace_id, livemode, bucket_start, shard, inbound, outbound)
SELECT workspace_id, livemode, created_at - created_at % 900000000, 0,
       SUM(direction = 'inbound'), SUM(direction = 'outbound')
FROM messages WHERE direction IN ('inbound', 'outbound') GROUP BY 1, 2, 3;

CREATE TRIGGER messages_count AFTER INSERT ON messages
WHEN NEW.direction IN ('inbound', 'outbound') BEGIN
    INSERT INTO message_counts (workspace_id, livemode, bucket_start, shard, inbound, outbound)
    VALUES (NEW.workspace_id, NEW.livemode, NEW.created_at - NEW.created_at % 900000000, 0,
            NEW.direction = 'inbound', NEW.direction = 'outbound')
    ON CONFLICT (workspace_id, livemode, bucket_start, shard)
    DO UPDATE SET inbound = inbound + excluded.inbound, outbound = outbound + excluded.outbound;
END;
