-- Full-text search over message text: a generated tsvector ('simple'
-- configuration over folded text: lower case, no diacritics) with a GIN
-- index, so a message is searchable in the transaction that stores it.

CREATE EXTENSION IF NOT EXISTS unaccent;
-- unaccent() is not IMMUTABLE (its dictionary could change); naming the
-- dictionary makes this wrapper safe to index. Everything but letters and
-- digits becomes a space, so words are what the query parser calls words
-- (PostgreSQL's parser would otherwise drop `<tags>` and split URLs its way).
CREATE OR REPLACE FUNCTION parley_fold(t text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT regexp_replace(lower(public.unaccent('public.unaccent'::regdictionary, t)), '[^[:alnum:]]+', ' ', 'g') $$;
ALTER TABLE messages ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, parley_fold(text))) STORED;
CREATE INDEX messages_search ON messages USING GIN (search);
