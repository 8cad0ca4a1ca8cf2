CREATE TABLE organizations (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    name       TEXT NOT NULL,
    key_hash   TEXT NOT NULL UNIQUE,
    scopes     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX api_keys_org ON api_keys(org_id);

CREATE TABLE idempotency_records (
    principal    TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    operation    TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
    status       INTEGER,
    content_type TEXT,
    body         BLOB,
    created_at   BIGINT NOT NULL,
    locked_until BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (principal, idem_key)
);
CREATE INDEX idempotency_expiry ON idempotency_records(expires_at);
