-- Search finds conversations by title and address, and contacts by name,
-- email and phone: generated tsvectors over folded text with GIN indexes
-- (as for messages, 0012).

ALTER TABLE conversations ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, parley_fold(title || ' ' || channel_ref))) STORED;
CREATE INDEX conversations_search ON conversations USING GIN (search);

ALTER TABLE contacts ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, parley_fold(display_name || ' '
        || coalesce(normalized_email, '') || ' ' || coalesce(normalized_phone, '')))) STORED;
CREATE INDEX contacts_words ON contacts USING GIN (search);
