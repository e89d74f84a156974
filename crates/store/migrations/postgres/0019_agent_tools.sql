-- The agent runtime's per-agent settings: a model overriding the engine's,
-- the tools the model may call, the debounce, and the sealed secrets of
-- HTTP tools (the agent's signing secret and each tool's headers).

ALTER TABLE agents ADD COLUMN model TEXT;
ALTER TABLE agents ADD COLUMN tools JSONB NOT NULL DEFAULT '[]';
ALTER TABLE agents ADD COLUMN debounce_ms BIGINT;
ALTER TABLE agents ADD COLUMN tool_secret TEXT;
ALTER TABLE agents ADD COLUMN tool_headers JSONB NOT NULL DEFAULT '{}';

-- Runs of calls name the call by its public id (`call_…`).
ALTER TABLE agent_runs ALTER COLUMN call_id TYPE TEXT;
