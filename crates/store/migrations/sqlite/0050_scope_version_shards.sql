-- The counters gain PostgreSQL's shard column (see its 0050), so both
-- backends bump them with one statement; SQLite's single writer never
-- waits on a row, so every bump here is shard 0.
CREATE TABLE scope_versions_sharded (
    workspace_id INTEGER NOT NULL,
    livemode     INTEGER NOT NULL,
    resource     TEXT    NOT NULL,
    shard        INTEGER NOT NULL DEFAULT 0,
    version      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, livemode, resource, shard)
);
INSERT INTO scope_versions_sharded (workspace_id, livemode, resource, shard, version)
    SELECT workspace_id, livemode, resource, 0, version FROM scope_versions;
DROP TABLE scope_versions;
ALTER TABLE scope_versions_sharded RENAME TO scope_versions;
