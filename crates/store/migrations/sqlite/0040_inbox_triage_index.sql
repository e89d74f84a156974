-- The inbox counts its views (open conversations by handler, assignee and
-- channel) on every list and summary: this index holds every column those
-- counts read, so they scan it alone and never the table (bench/inbox.sh).
CREATE INDEX conversations_triage ON conversations
    (workspace_id, livemode, status, handler, assignee_user_id, channel, unread_count);
