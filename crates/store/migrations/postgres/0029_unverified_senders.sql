-- An email sender the receiving server did not authenticate is kept apart:
-- its identity is `unverified` (never the same as a contact's proven
-- address), and its conversation too (never the thread of the proven one).
ALTER TABLE contact_identities ADD COLUMN unverified BOOLEAN NOT NULL DEFAULT false;
DROP INDEX contact_identities_address;
CREATE UNIQUE INDEX contact_identities_address ON contact_identities (workspace_id, livemode, channel, address, unverified);
ALTER TABLE conversations ADD COLUMN unverified_sender BOOLEAN NOT NULL DEFAULT false;
DROP INDEX conversations_open;
CREATE UNIQUE INDEX conversations_open ON conversations (workspace_id, livemode, channel_id, channel_ref, unverified_sender)
    WHERE status <> 'closed' AND kind <> 'call';
