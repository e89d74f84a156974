-- A channel that polls its provider (Telegram's getUpdates) has at most one
-- pending poll job: each poll queues the next as it completes, and two
-- chains would ask the provider at once (Telegram refuses that).
CREATE UNIQUE INDEX jobs_one_poll_per_channel ON jobs (queue) WHERE kind = 'channel.poll' AND status = 'pending';
