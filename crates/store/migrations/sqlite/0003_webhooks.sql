-- Webhook endpoints, the delivery outbox (one row per event and endpoint,
-- written in the transaction that records the event) and the attempt log.

CREATE TABLE webhook_endpoints (
    id                         INTEGER PRIMARY KEY,
    workspace_id               INTEGER     NOT NULL REFERENCES workspaces(id),
    livemode                   INTEGER   NOT NULL,
    url                        TEXT    NOT NULL,
    description                TEXT,
    events                     TEXT   NOT NULL,
    status                     TEXT    NOT NULL,
    disabled_reason            TEXT,
    -- Secrets are sealed with the master key. After a rotation the previous
    -- one also signs until it expires.
    sealed_secret              TEXT    NOT NULL,
    sealed_previous_secret     TEXT,
    previous_secret_expires_at INTEGER,
    -- Set at the first failure after a success; five days of failing disables.
    failing_since              INTEGER,
    -- The instance delivering to this endpoint, and until when (a lease).
    dispatch_locked_by         TEXT,
    dispatch_locked_until      INTEGER,
    created_at                 INTEGER     NOT NULL,
    updated_at                 INTEGER     NOT NULL
);
CREATE INDEX webhook_endpoints_list ON webhook_endpoints (workspace_id, livemode, created_at DESC, id DESC);

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    workspace_id    INTEGER     NOT NULL,
    livemode        INTEGER   NOT NULL,
    endpoint_id     INTEGER     NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
    event_id        TEXT    NOT NULL,
    event_type      TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER     NOT NULL,
    created_at      INTEGER     NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, endpoint_id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

CREATE TABLE webhook_attempts (
    id                    INTEGER PRIMARY KEY,
    workspace_id          INTEGER     NOT NULL,
    livemode              INTEGER   NOT NULL,
    endpoint_id           INTEGER     NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
    delivery_id           INTEGER     NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    event_id              TEXT    NOT NULL,
    event_type            TEXT    NOT NULL,
    attempt               INTEGER NOT NULL,
    status_code           INTEGER,
    error                 TEXT,
    duration_ms           INTEGER     NOT NULL,
    response_body_excerpt TEXT,
    next_attempt_at       INTEGER,
    created_at            INTEGER     NOT NULL
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id);
CREATE INDEX webhook_attempts_created ON webhook_attempts (created_at);

-- Events are kept 30 days.
CREATE INDEX events_created ON events (created_at);
