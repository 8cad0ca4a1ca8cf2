-- Running services: numbered versions, the replica supervising a service's
-- processes, where its serving version answers, its health, and its logs.
ALTER TABLE services ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE services ADD COLUMN upstream TEXT;
ALTER TABLE services ADD COLUMN runner TEXT;
ALTER TABLE services ADD COLUMN runner_seen BIGINT NOT NULL DEFAULT 0;
ALTER TABLE services ADD COLUMN health TEXT;

-- A version is immutable once written: its bundle, command, variables
-- (secret values among them, never read back through the API), health
-- check and add-ons. Only its state moves.
CREATE TABLE service_versions (
    service_id TEXT NOT NULL REFERENCES services(id),
    number     INTEGER NOT NULL,
    org_id     TEXT NOT NULL,
    bundle_id  TEXT,
    spec       TEXT NOT NULL,
    state      TEXT NOT NULL,
    task_id    TEXT,
    detail     TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (service_id, number)
);

-- Log lines, numbered per service by the replica that supervises it, and
-- bounded per service (the oldest go first).
CREATE TABLE service_logs (
    service_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    at         BIGINT NOT NULL,
    stream     TEXT NOT NULL,
    version    INTEGER NOT NULL,
    text       TEXT NOT NULL,
    PRIMARY KEY (service_id, seq)
);
CREATE INDEX service_logs_at ON service_logs(service_id, at);

-- The managed PostgreSQL add-on: one database and role per service, and
-- the dump taken before teardown dropped them.
CREATE TABLE service_databases (
    service_id TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    name       TEXT NOT NULL,
    password   TEXT NOT NULL,
    state      TEXT NOT NULL,
    dump_sha   TEXT,
    created_at BIGINT NOT NULL
);
