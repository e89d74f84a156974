-- A call's page lists the runs that answered its turns (`call_id` filter).
CREATE INDEX agent_runs_call ON agent_runs (call_id, created_at DESC, id DESC) WHERE call_id IS NOT NULL;
-- The home page counts a window's messages by direction from the index alone.
CREATE INDEX messages_created ON messages (workspace_id, livemode, created_at, direction);
-- A contact's page lists their calls (`contact_id` filter).
CREATE INDEX calls_contact ON calls (workspace_id, livemode, contact_id, created_at DESC, id DESC) WHERE contact_id IS NOT NULL;
