-- A note a member shares with the conversation's agent: its next answers
-- read it as the team's guidance (other notes no agent ever reads).
ALTER TABLE conversation_notes ADD COLUMN for_agent INTEGER NOT NULL DEFAULT 0;
