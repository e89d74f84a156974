-- Webhook deliveries go out through the job queue: one `webhook.endpoint`
-- drain job per endpoint with pending deliveries (the endpoint leases
-- below are no longer used).
INSERT INTO jobs (kind, queue, payload, workspace_id, livemode, run_at, created_at)
SELECT 'webhook.endpoint', 'webhook:' || e.id, json_object('endpoint_id', e.id), e.workspace_id, e.livemode,
       CAST(strftime('%s', 'now') AS INTEGER) * 1000000, CAST(strftime('%s', 'now') AS INTEGER) * 1000000
FROM webhook_endpoints e
WHERE EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.status = 'pending');
