-- Search stays fast at a million messages: the index carries each message's
-- scope, conversation, channel and month as tokens of a second column, so
-- scope and filters are intersected inside FTS5 rather than checked row by
-- row through a join, and counting stops early. A two-character prefix
-- index answers short `prefix*` queries without merging every term that
-- starts with them.

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
DROP TABLE messages_fts;

-- Computed when read (never stored): s<workspace>x<livemode> c<conversation>
-- h<channel> t<yyyymm of created_at>.
ALTER TABLE messages ADD COLUMN search_tags TEXT GENERATED ALWAYS AS (
    's' || workspace_id || 'x' || livemode || ' c' || conversation_id || ' h' || channel_id
    || ' t' || strftime('%Y%m', created_at / 1000000, 'unixepoch')) VIRTUAL;

CREATE VIRTUAL TABLE messages_fts USING fts5 (text, search_tags, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2', prefix = '2');
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, text, search_tags) VALUES (new.id, new.text, new.search_tags);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, search_tags) VALUES ('delete', old.id, old.text, old.search_tags);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text, conversation_id ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, search_tags) VALUES ('delete', old.id, old.text, old.search_tags);
    INSERT INTO messages_fts (rowid, text, search_tags) VALUES (new.id, new.text, new.search_tags);
END;
