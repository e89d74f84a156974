-- An endpoint has at most one pending drain job: two could serve it at
-- once (and deliver an event twice) when transactions queuing its first
-- deliveries raced. Extra drains are idle copies; the oldest stays.
DELETE FROM jobs
WHERE kind = 'webhook.endpoint' AND status = 'pending'
  AND id NOT IN (SELECT MIN(id) FROM jobs WHERE kind = 'webhook.endpoint' AND status = 'pending' GROUP BY queue);
CREATE UNIQUE INDEX jobs_one_drain_per_endpoint ON jobs (queue) WHERE kind = 'webhook.endpoint' AND status = 'pending';
