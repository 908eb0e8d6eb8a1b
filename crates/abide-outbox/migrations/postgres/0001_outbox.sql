-- Times are milliseconds since the Unix epoch (UTC), taken from the caller's clock.
CREATE TABLE items (
    id                  TEXT PRIMARY KEY NOT NULL,
    provider            TEXT NOT NULL,
    current_provider    TEXT NOT NULL,
    method              TEXT NOT NULL,
    path                TEXT NOT NULL,
    headers_json        TEXT NOT NULL,
    body_json           TEXT,
    idempotency_key     TEXT NOT NULL UNIQUE,
    created_at_ms       BIGINT NOT NULL,
    state               TEXT NOT NULL,
    attempts            BIGINT NOT NULL DEFAULT 0,
    -- The current attempt window starts at enqueue and again at each requeue by a person;
    -- attempt caps and the maximum age are measured within it.
    window_attempts     BIGINT NOT NULL DEFAULT 0,
    window_start_ms     BIGINT NOT NULL,
    next_attempt_at_ms  BIGINT NOT NULL,
    last_provider_code  TEXT,
    reason              TEXT,
    lease_owner         TEXT,
    lease_expires_at_ms BIGINT,
    updated_at_ms       BIGINT NOT NULL
);

CREATE INDEX items_claim ON items (current_provider, state, next_attempt_at_ms);
CREATE INDEX items_state ON items (state, lease_expires_at_ms);

CREATE TABLE attempts (
    item_id            TEXT NOT NULL,
    attempt_no         BIGINT NOT NULL,
    at_ms              BIGINT NOT NULL,
    provider           TEXT NOT NULL,
    remote_http_status BIGINT,
    remote_smpp_code   BIGINT,
    verdict_class      TEXT NOT NULL,
    delay_ms           BIGINT,
    delay_reason       TEXT,
    latency_ms         BIGINT NOT NULL,
    idempotency_key    TEXT NOT NULL,
    PRIMARY KEY (item_id, attempt_no)
);

CREATE INDEX attempts_remote ON attempts (provider, remote_http_status, remote_smpp_code);
