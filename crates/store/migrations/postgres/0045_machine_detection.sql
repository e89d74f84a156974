-- Answering-machine detection on outbound calls: who picked up, and how
-- the verdict was reached (cause, when, the beep's end, a message left).
ALTER TABLE calls ADD COLUMN answered_by TEXT;
ALTER TABLE calls ADD COLUMN machine_detection JSONB;
