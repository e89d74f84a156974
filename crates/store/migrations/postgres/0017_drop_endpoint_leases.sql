-- The endpoint leases the webhook dispatcher used before it ran on the job
-- queue (0016): nothing reads or writes them any more.
ALTER TABLE webhook_endpoints DROP COLUMN dispatch_locked_by;
ALTER TABLE webhook_endpoints DROP COLUMN dispatch_locked_until;
