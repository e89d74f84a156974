-- The durable job queue (crates/jobs). A job is enqueued in the same
-- transaction as the change that calls for it, so nothing acknowledged is
-- lost. A worker claims due jobs with a lease; a crashed worker's leases
-- lapse and another worker runs those jobs again (at least once). A failed
-- attempt is retried on its kind's schedule; after the last one the job is
-- dead: kept, with its error, for inspection.
--
-- `queue` orders jobs: a job waits while an earlier job of its queue is
-- still pending (a conversation's messages leave in order).

CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT    NOT NULL,
    queue        TEXT,
    payload      TEXT    NOT NULL,
    workspace_id INTEGER,
    livemode     INTEGER,
    status       TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    run_at       INTEGER NOT NULL,
    leased_by    TEXT,
    lease_until  INTEGER,
    last_error   TEXT,
    created_at   INTEGER NOT NULL,
    dead_at      INTEGER
);
CREATE INDEX jobs_due ON jobs (run_at, id) WHERE status = 'pending';
CREATE INDEX jobs_queue ON jobs (queue, id) WHERE status = 'pending' AND queue IS NOT NULL;
CREATE INDEX jobs_leased ON jobs (leased_by) WHERE leased_by IS NOT NULL;

-- The courier's queue becomes `message.send` jobs.
INSERT INTO jobs (kind, queue, payload, workspace_id, livemode, attempts, run_at, last_error, created_at)
SELECT 'message.send', 'conversation:' || conversation_id,
       json_object('message_id', message_id, 'conversation_id', conversation_id, 'channel_id', channel_id),
       workspace_id, livemode, attempts, next_attempt_at, last_error, next_attempt_at
FROM outbound_queue ORDER BY message_id;
DROP TABLE outbound_queue;

-- Every call not yet ended gets its watchdog job.
INSERT INTO jobs (kind, payload, workspace_id, livemode, run_at, created_at)
SELECT 'call.watch', json_object('call_id', public_id), workspace_id, livemode, created_at, created_at
FROM calls WHERE status IN ('queued', 'ringing', 'in_progress');
