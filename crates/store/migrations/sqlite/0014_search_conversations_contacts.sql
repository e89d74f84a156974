-- Search finds conversations by title and address, and contacts by name,
-- email and phone: FTS5 indexes kept in step by triggers, each with its
-- scope as a token of a second column (as for messages, 0013).

ALTER TABLE conversations ADD COLUMN search_tags TEXT GENERATED ALWAYS AS ('s' || workspace_id || 'x' || livemode) VIRTUAL;
CREATE VIRTUAL TABLE conversations_fts USING fts5 (title, channel_ref, search_tags, content = 'conversations',
    content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2', prefix = '2');
INSERT INTO conversations_fts (conversations_fts) VALUES ('rebuild');
CREATE TRIGGER conversations_fts_insert AFTER INSERT ON conversations BEGIN
    INSERT INTO conversations_fts (rowid, title, channel_ref, search_tags) VALUES (new.id, new.title, new.channel_ref, new.search_tags);
END;
CREATE TRIGGER conversations_fts_delete AFTER DELETE ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, title, channel_ref, search_tags)
        VALUES ('delete', old.id, old.title, old.channel_ref, old.search_tags);
END;
CREATE TRIGGER conversations_fts_update AFTER UPDATE OF title, channel_ref ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, title, channel_ref, search_tags)
        VALUES ('delete', old.id, old.title, old.channel_ref, old.search_tags);
    INSERT INTO conversations_fts (rowid, title, channel_ref, search_tags) VALUES (new.id, new.title, new.channel_ref, new.search_tags);
END;

ALTER TABLE contacts ADD COLUMN search_tags TEXT GENERATED ALWAYS AS ('s' || workspace_id || 'x' || livemode) VIRTUAL;
CREATE VIRTUAL TABLE contacts_fts USING fts5 (display_name, normalized_email, normalized_phone, search_tags,
    content = 'contacts', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2', prefix = '2');
INSERT INTO contacts_fts (contacts_fts) VALUES ('rebuild');
CREATE TRIGGER contacts_fts_insert AFTER INSERT ON contacts BEGIN
    INSERT INTO contacts_fts (rowid, display_name, normalized_email, normalized_phone, search_tags)
        VALUES (new.id, new.display_name, new.normalized_email, new.normalized_phone, new.search_tags);
END;
CREATE TRIGGER contacts_fts_delete AFTER DELETE ON contacts BEGIN
    INSERT INTO contacts_fts (contacts_fts, rowid, display_name, normalized_email, normalized_phone, search_tags)
        VALUES ('delete', old.id, old.display_name, old.normalized_email, old.normalized_phone, old.search_tags);
END;
CREATE TRIGGER contacts_fts_update AFTER UPDATE OF display_name, normalized_email, normalized_phone ON contacts BEGIN
    INSERT INTO contacts_fts (contacts_fts, rowid, display_name, normalized_email, normalized_phone, search_tags)
        VALUES ('delete', old.id, old.display_name, old.normalized_email, old.normalized_phone, old.search_tags);
    INSERT INTO contacts_fts (rowid, display_name, normalized_email, normalized_phone, search_tags)
        VALUES (new.id, new.display_name, new.normalized_email, new.normalized_phone, new.search_tags);
END;
