-- Claims read only what they could take. `jobs_due` holds every pending
-- job, running ones included, so a claim walked them all (and their dead
-- index entries: jobs are deleted as they finish) to find a few of its own
-- kinds: on PostgreSQL under an agent-reply load the claim was ~80% of the
-- database's execution time, 5 ms and 15,000 buffers a call. A claim now
-- reads jobs of its kinds nobody leased (by kind, then due time), or
-- leases that lapsed (by lease end). SQLite has no such migration: its
-- planner keeps `jobs_due` for this OR (checked with EXPLAIN QUERY PLAN), and
-- there most jobs are handed to their worker as they are queued.
CREATE INDEX jobs_claimable ON jobs (kind, run_at, id) WHERE status = 'pending' AND lease_until IS NULL;
CREATE INDEX jobs_lapsing ON jobs (lease_until) WHERE status = 'pending' AND lease_until IS NOT NULL;
