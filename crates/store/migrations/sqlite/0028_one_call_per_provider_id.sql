-- A provider's call id names one call: a repeated (or replayed) inbound
-- webhook for a call already taken finds it instead of queuing another.
-- Calls a replay made before this index keep their row, without the id.
UPDATE calls SET provider_call_id = NULL
WHERE provider_call_id IS NOT NULL
  AND id NOT IN (SELECT MIN(id) FROM calls WHERE provider_call_id IS NOT NULL GROUP BY provider, provider_call_id);
CREATE UNIQUE INDEX calls_provider_call_id ON calls (provider, provider_call_id) WHERE provider_call_id IS NOT NULL;
