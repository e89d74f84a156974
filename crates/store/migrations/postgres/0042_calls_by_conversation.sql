-- The inbox shows a conversation's calls in its thread (`GET /calls?conversation_id=`).
CREATE INDEX calls_conversation ON calls (workspace_id, livemode, conversation_id, created_at DESC, id DESC)
    WHERE conversation_id IS NOT NULL;
