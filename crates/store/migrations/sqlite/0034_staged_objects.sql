-- Files written to object storage before the transaction that names them
-- (a message's attachments): the transaction deletes their row; a row left
-- behind (the transaction failed, a replay, a crash) names an orphaned
-- object that housekeeping removes after a grace period.
CREATE TABLE staged_objects (
    key        TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE INDEX staged_objects_created ON staged_objects (created_at);
