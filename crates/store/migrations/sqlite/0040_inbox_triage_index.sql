-- The inbox counts its views (open conversations by handler, assignee and
-- channel) on every list and summary: this index holds every column those
-- counts read, so they scan it alone and never the table (bench/inbox.sh).
CREATE INDEX conversations_triage ON conversations
    (workspace_id, livemode, status, handler, assignee_user_id, channel, unread_count);

-- A member's conversations by status, newest first, with their unread
-- counts: Mine and the assignee filter count and page from it alone.
DROP INDEX conversations_assignee;
CREATE INDEX conversations_assignee ON conversations
    (workspace_id, livemode, assignee_user_id, status, last_message_ts DESC, id DESC, unread_count)
    WHERE assignee_user_id IS NOT NULL;
