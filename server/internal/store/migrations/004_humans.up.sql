-- People who act on the human pages. A human belongs to one organisation;
-- kind 'local_operator' marks the one `pier server` signs in on this machine.
CREATE TABLE humans (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    kind       TEXT NOT NULL CHECK (kind IN ('person', 'local_operator')),
    name       TEXT NOT NULL,
    email      TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
CREATE INDEX humans_org ON humans(org_id, kind);

-- One-time sign-in links. Only the hash of the token is kept; used_at is
-- the compare-and-set that makes a link work once.
CREATE TABLE signin_tokens (
    token_hash TEXT PRIMARY KEY,
    human_id   TEXT NOT NULL REFERENCES humans(id),
    next_path  TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);

-- Signed-in sessions, by the hash of the cookie's secret.
CREATE TABLE human_sessions (
    token_hash TEXT PRIMARY KEY,
    human_id   TEXT NOT NULL REFERENCES humans(id),
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    ended_at   BIGINT
);

-- Signups an agent started and a human reviews. The claim secret and the
-- review token are kept only as hashes. key_id is set by the one poll that
-- mints the key (state complete -> claimed).
CREATE TABLE signups (
    id           TEXT PRIMARY KEY,
    secret_hash  TEXT NOT NULL,
    review_hash  TEXT NOT NULL UNIQUE,
    email        TEXT NOT NULL DEFAULT '',
    org_name     TEXT NOT NULL DEFAULT '',
    state        TEXT NOT NULL CHECK (state IN ('pending_review', 'pending_card', 'complete', 'claimed')),
    org_id       TEXT REFERENCES organizations(id),
    project_id   TEXT,
    human_id     TEXT,
    setup_id     TEXT,
    key_id       TEXT,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    reviewed_at  BIGINT,
    completed_at BIGINT,
    claimed_at   BIGINT
);

-- Card flows on the built-in test payment provider: one per signup, and one
-- per setup link an agent asks for on an existing account.
CREATE TABLE billing_setups (
    id                TEXT PRIMARY KEY,
    org_id            TEXT NOT NULL REFERENCES organizations(id),
    secret_hash       TEXT NOT NULL,
    reason            TEXT NOT NULL CHECK (reason IN ('signup', 'scratch_account', 'expired_card', 'replace_card')),
    signup_id         TEXT,
    state             TEXT NOT NULL CHECK (state IN ('pending', 'declined', 'complete')),
    decline_code      TEXT NOT NULL DEFAULT '',
    payment_method_id TEXT,
    created_at        BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL,
    completed_at      BIGINT
);
CREATE INDEX billing_setups_org ON billing_setups(org_id, created_at);

-- Cards on file. The full number is never stored: brand and last four only.
CREATE TABLE payment_methods (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    brand      TEXT NOT NULL,
    last4      TEXT NOT NULL CHECK (length(last4) = 4),
    exp_month  INTEGER NOT NULL CHECK (exp_month BETWEEN 1 AND 12),
    exp_year   INTEGER NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('active', 'replaced')),
    created_at BIGINT NOT NULL
);
CREATE INDEX payment_methods_org ON payment_methods(org_id, state);
