-- Billing: one account per workspace and mode, and an append-only ledger.
-- The account's balance is updated in the transaction that appends its entry,
-- so it always equals the sum of the entries. Holds reserve money for calls in
-- progress. Amounts are integer cents.

CREATE TABLE billing_accounts (
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    livemode      INTEGER NOT NULL,
    balance_cents INTEGER NOT NULL,
    held_cents    INTEGER NOT NULL DEFAULT 0 CHECK (held_cents >= 0),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, livemode)
);

CREATE TABLE ledger_entries (
    id                  INTEGER PRIMARY KEY,
    workspace_id        INTEGER NOT NULL,
    livemode            INTEGER NOT NULL,
    type                TEXT    NOT NULL CHECK (type IN ('credit', 'charge', 'refund', 'adjustment')),
    amount_cents        INTEGER NOT NULL,
    balance_after_cents INTEGER NOT NULL,
    description         TEXT    NOT NULL,
    resource_type       TEXT,
    resource_id         TEXT,
    -- Unique per account: a retried charge finds its first posting.
    entry_key           TEXT,
    created_at          INTEGER NOT NULL,
    FOREIGN KEY (workspace_id, livemode) REFERENCES billing_accounts (workspace_id, livemode)
);
CREATE INDEX ledger_entries_list ON ledger_entries (workspace_id, livemode, created_at DESC, id DESC);
CREATE UNIQUE INDEX ledger_entries_key ON ledger_entries (workspace_id, livemode, entry_key) WHERE entry_key IS NOT NULL;

CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE ON ledger_entries
BEGIN
    SELECT RAISE(ABORT, 'ledger entries are append-only');
END;
CREATE TRIGGER ledger_entries_no_delete BEFORE DELETE ON ledger_entries
BEGIN
    SELECT RAISE(ABORT, 'ledger entries are append-only');
END;

CREATE TABLE billing_holds (
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    hold_key     TEXT    NOT NULL,
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, livemode, hold_key)
);

-- Workspaces created before billing: a test balance of 100.00 USD, as new ones get.
INSERT INTO billing_accounts (workspace_id, livemode, balance_cents, held_cents, created_at, updated_at)
SELECT id, 0, 10000, 0, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER),
       CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM workspaces;
INSERT INTO ledger_entries (workspace_id, livemode, type, amount_cents, balance_after_cents, description, entry_key, created_at)
SELECT id, 0, 'credit', 10000, 10000, 'Starting test balance', 'starting_credit',
       CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM workspaces;
INSERT INTO billing_accounts (workspace_id, livemode, balance_cents, held_cents, created_at, updated_at)
SELECT id, 1, 0, 0, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER),
       CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM workspaces;
