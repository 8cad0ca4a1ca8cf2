-- Content-addressed blobs: one row per distinct content, shared by every
-- bundle that carries it.
CREATE TABLE blobs (
    sha256     TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    data       BLOB NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE bundles (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    sha256      TEXT NOT NULL,
    file_count  INTEGER NOT NULL,
    total_bytes BIGINT NOT NULL,
    manifest    TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (org_id, sha256)
);

CREATE TABLE services (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES organizations(id),
    project_id   TEXT NOT NULL REFERENCES projects(id),
    name         TEXT NOT NULL,
    target       TEXT NOT NULL,
    preview_host TEXT NOT NULL UNIQUE,
    domain       TEXT,
    bundle_id    TEXT,
    state        TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX services_project_name ON services(project_id, name) WHERE state <> 'torn_down';
CREATE INDEX services_domain ON services(domain);

-- The sandbox registrar's own purchase ledger. A purchase is keyed by the
-- caller's idempotency reference, and a domain is sold once.
CREATE TABLE registrar_purchases (
    ref          TEXT PRIMARY KEY,
    domain       TEXT NOT NULL UNIQUE,
    org_id       TEXT NOT NULL,
    years        INTEGER NOT NULL,
    amount_micro BIGINT NOT NULL,
    auth_code    TEXT NOT NULL,
    registrant   TEXT,
    created_at   BIGINT NOT NULL
);

CREATE TABLE zones (
    domain     TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    serial     BIGINT NOT NULL,
    records    TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- What a task needs to resume: its inputs and the references it recorded
-- before calling a provider.
ALTER TABLE tasks ADD COLUMN payload TEXT;

-- The runner that holds a task: one at a time, however many jobs point at it.
ALTER TABLE tasks ADD COLUMN lease_owner TEXT;
ALTER TABLE tasks ADD COLUMN lease_until BIGINT;
