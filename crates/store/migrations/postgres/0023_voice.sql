-- How an agent speaks and listens on calls: its voice (engine, voice id,
-- speed), transcriber, interruption threshold and silence handling, stored
-- as one JSON object. The old `voice` column (a voice id) moves into it.

ALTER TABLE agents ADD COLUMN speech JSONB NOT NULL DEFAULT '{}';
UPDATE agents SET speech = jsonb_build_object('voice', jsonb_build_object('tts_engine', 'espeak', 'voice_id', voice))
 WHERE voice IS NOT NULL;
ALTER TABLE agents DROP COLUMN voice;

-- Where the agent transferred a call, and the voice channel a call is on.
ALTER TABLE calls ADD COLUMN transfer_to TEXT;
ALTER TABLE calls ADD COLUMN channel_id BIGINT;
