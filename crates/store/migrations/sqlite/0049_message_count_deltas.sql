-- One writer at a time: the trigger's upsert cannot deadlock here, so the
-- counts stay as 0048 keeps them. PostgreSQL appends deltas that
-- housekeeping folds; both backends read `message_count_totals`.
CREATE VIEW message_count_totals AS
    SELECT workspace_id, livemode, bucket_start, inbound, outbound FROM message_counts;
