-- A conversation's handoffs, newest last: an agent taking a conversation
-- back reads only what the contact wrote since its last handoff.
CREATE INDEX handoffs_conversation ON handoffs (conversation_id, created_at);
