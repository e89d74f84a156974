-- Contacts, their channel identities and a trigram index for `q` searches.
-- Phone and email are unique per workspace and mode once normalised.

CREATE TABLE contacts (
    id               INTEGER PRIMARY KEY,
    workspace_id     INTEGER NOT NULL REFERENCES workspaces(id),
    livemode         INTEGER NOT NULL,
    display_name     TEXT    NOT NULL,
    canonical_name   TEXT,
    normalized_phone TEXT,
    normalized_email TEXT,
    avatar_url       TEXT,
    notes            TEXT,
    tags             TEXT    NOT NULL DEFAULT '[]',
    origin           TEXT    NOT NULL,
    metadata         TEXT    NOT NULL DEFAULT '{}',
    -- What `q` matches: the canonical name, email, phone and the phone's digits.
    search_text      TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX contacts_list ON contacts (workspace_id, livemode, created_at DESC, id DESC);
CREATE INDEX contacts_updated ON contacts (workspace_id, livemode, updated_at);
CREATE UNIQUE INDEX contacts_phone ON contacts (workspace_id, livemode, normalized_phone) WHERE normalized_phone IS NOT NULL;
CREATE UNIQUE INDEX contacts_email ON contacts (workspace_id, livemode, normalized_email) WHERE normalized_email IS NOT NULL;

CREATE TABLE contact_identities (
    id           INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    contact_id   INTEGER NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    channel      TEXT    NOT NULL,
    address      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX contact_identities_address ON contact_identities (workspace_id, livemode, channel, address);
CREATE INDEX contact_identities_contact ON contact_identities (contact_id);

-- Substring search: the trigram tokenizer answers LIKE '%term%'-style
-- matches of 3 or more characters from an index. Kept in step by triggers.
CREATE VIRTUAL TABLE contacts_search USING fts5 (search_text, content = 'contacts', content_rowid = 'id', tokenize = 'trigram');
CREATE TRIGGER contacts_search_insert AFTER INSERT ON contacts BEGIN
    INSERT INTO contacts_search (rowid, search_text) VALUES (new.id, new.search_text);
END;
CREATE TRIGGER contacts_search_delete AFTER DELETE ON contacts BEGIN
    INSERT INTO contacts_search (contacts_search, rowid, search_text) VALUES ('delete', old.id, old.search_text);
END;
CREATE TRIGGER contacts_search_update AFTER UPDATE OF search_text ON contacts BEGIN
    INSERT INTO contacts_search (contacts_search, rowid, search_text) VALUES ('delete', old.id, old.search_text);
    INSERT INTO contacts_search (rowid, search_text) VALUES (new.id, new.search_text);
END;
