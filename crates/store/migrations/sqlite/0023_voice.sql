-- How an agent speaks and listens on calls: its voice (engine, voice id,
-- speed), transcriber, interruption threshold and silence handling, stored
-- as one JSON object. The old `voice` column (a voice id) moves into it.

ALTER TABLE agents ADD COLUMN speech TEXT NOT NULL DEFAULT '{}';
UPDATE agents SET speech = json_object('voice', json_object('tts_engine', 'espeak', 'voice_id', voice))
 WHERE voice IS NOT NULL;
ALTER TABLE agents DROP COLUMN voice;

-- Where the agent transferred a call, and the voice channel a call is on.
ALTER TABLE calls ADD COLUMN transfer_to TEXT;
ALTER TABLE calls ADD COLUMN channel_id INTEGER;

-- Word timings and an agent turn's latency breakdown, per segment; the
-- call's voice-to-voice latency once it ends.
ALTER TABLE call_segments ADD COLUMN words TEXT NOT NULL DEFAULT '[]';
ALTER TABLE call_segments ADD COLUMN latency TEXT;
ALTER TABLE calls ADD COLUMN latency TEXT;
