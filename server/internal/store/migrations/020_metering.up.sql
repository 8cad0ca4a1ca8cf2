-- Metering: what each running service (and its add-ons) costs by the hour,
-- charged against its project's budget once per service and period.

-- A meter follows one service from its launch's success until its
-- teardown. credit_micro is what the launch prepaid (its quote's service
-- price) and metered usage has not yet drawn.
CREATE TABLE meters (
    service_id   TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL,
    project_id   TEXT NOT NULL,
    credit_micro BIGINT NOT NULL CHECK (credit_micro >= 0),
    started_at   BIGINT NOT NULL,
    stopped_at   BIGINT
);
CREATE INDEX meters_project ON meters (project_id);

-- A segment is a stretch at one monthly price: a resize ends one and
-- starts the next.
CREATE TABLE meter_segments (
    service_id    TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    monthly_micro BIGINT NOT NULL,
    lines         TEXT NOT NULL,
    started_at    BIGINT NOT NULL,
    ended_at      BIGINT,
    PRIMARY KEY (service_id, seq)
);

-- One charge per service and period (a calendar month, UTC, "2026-11"):
-- the key is what keeps a period from being charged twice, by a retry, a
-- restarted server or another replica.
CREATE TABLE meter_charges (
    service_id   TEXT NOT NULL,
    period       TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    project_id   TEXT NOT NULL,
    hours        INTEGER NOT NULL,
    usage_micro  BIGINT NOT NULL,
    credit_micro BIGINT NOT NULL,
    amount_micro BIGINT NOT NULL,
    unpaid_micro BIGINT NOT NULL,
    receipt_id   TEXT NOT NULL,
    charged_at   BIGINT NOT NULL,
    PRIMARY KEY (service_id, period)
);
CREATE INDEX meter_charges_project ON meter_charges (project_id, period);

-- A monthly budget's closed periods: what was spent in each, after which
-- the project's spent amount starts again from zero.
CREATE TABLE budget_periods (
    project_id  TEXT NOT NULL,
    period      TEXT NOT NULL,
    limit_micro BIGINT NOT NULL,
    spent_micro BIGINT NOT NULL,
    closed_at   BIGINT NOT NULL,
    PRIMARY KEY (project_id, period)
);

-- Budget notices at 50, 80 and 100 %, once each per project and period
-- ("lifetime" for a lifetime budget). mailed_at is set once the human's
-- mail is handed to the relay.
CREATE TABLE budget_notices (
    project_id  TEXT NOT NULL,
    period      TEXT NOT NULL,
    percent     INTEGER NOT NULL,
    org_id      TEXT NOT NULL,
    spent_micro BIGINT NOT NULL,
    limit_micro BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    mailed_at   BIGINT,
    PRIMARY KEY (project_id, period, percent)
);

-- Domain renewals: one row per domain and term (the first renewal is term
-- 1), renewed or lapsed, whoever decides it; and the notices sent ahead of
-- an expiry that no renewal covers, once per term and days ahead.
CREATE TABLE domain_renewals (
    domain       TEXT NOT NULL,
    term         INTEGER NOT NULL,
    org_id       TEXT NOT NULL,
    project_id   TEXT NOT NULL,
    state        TEXT NOT NULL,
    amount_micro BIGINT NOT NULL,
    decided_by   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (domain, term)
);

CREATE TABLE domain_notices (
    domain     TEXT NOT NULL,
    term       INTEGER NOT NULL,
    days       INTEGER NOT NULL,
    org_id     TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    mailed_at  BIGINT,
    PRIMARY KEY (domain, term, days)
);
