-- Knowledge collections: documents (the upload is kept in file storage
-- until a job extracts and splits it) and their passages, whose folded and
-- stemmed words (`terms`, computed by Parley) are indexed for BM25 by FTS5,
-- with the scope and collection as tokens of a second column, as search
-- does (0013). Collections keep their passage and word counts for ranking.

CREATE TABLE knowledge_collections (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id   INTEGER NOT NULL REFERENCES workspaces(id),
    livemode       INTEGER NOT NULL,
    name           TEXT    NOT NULL,
    description    TEXT,
    document_count INTEGER NOT NULL DEFAULT 0,
    passage_count  INTEGER NOT NULL DEFAULT 0,
    word_count     INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX knowledge_collections_list ON knowledge_collections (workspace_id, livemode, created_at DESC, id DESC);

CREATE TABLE knowledge_documents (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    livemode      INTEGER NOT NULL,
    collection_id INTEGER NOT NULL,
    title         TEXT    NOT NULL,
    source        TEXT,
    content_type  TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    error         TEXT,
    passage_count INTEGER NOT NULL DEFAULT 0,
    bytes         INTEGER NOT NULL,
    storage_key   TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX knowledge_documents_list ON knowledge_documents (workspace_id, livemode, collection_id, created_at DESC, id DESC);

CREATE TABLE knowledge_passages (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id  INTEGER NOT NULL,
    livemode      INTEGER NOT NULL,
    collection_id INTEGER NOT NULL,
    document_id   INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    text          TEXT    NOT NULL,
    terms         TEXT    NOT NULL,
    words         INTEGER NOT NULL,
    search_tags   TEXT GENERATED ALWAYS AS ('s' || workspace_id || 'x' || livemode || ' c' || collection_id) VIRTUAL
);
CREATE INDEX knowledge_passages_document ON knowledge_passages (document_id, position);
CREATE VIRTUAL TABLE knowledge_passages_fts USING fts5 (terms, search_tags, content = 'knowledge_passages',
    content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2');
CREATE TRIGGER knowledge_passages_fts_insert AFTER INSERT ON knowledge_passages BEGIN
    INSERT INTO knowledge_passages_fts (rowid, terms, search_tags) VALUES (new.id, new.terms, new.search_tags);
END;
CREATE TRIGGER knowledge_passages_fts_delete AFTER DELETE ON knowledge_passages BEGIN
    INSERT INTO knowledge_passages_fts (knowledge_passages_fts, rowid, terms, search_tags)
        VALUES ('delete', old.id, old.terms, old.search_tags);
END;
