-- The fake-money sandbox (docs/sandbox-proof.md). Money is integer micro-USD,
-- times integer microseconds, as everywhere in the store.

CREATE TABLE sandbox_sessions (
    id                  TEXT PRIMARY KEY,
    -- SHA-256 of the agent capability; the capability itself is shown once.
    capability_hash     TEXT NOT NULL,
    -- The session the server ran itself to mint the reference release.
    reference           INTEGER NOT NULL DEFAULT 0,
    created_at          BIGINT NOT NULL,
    mandate_jws         TEXT,
    mandate_sha256      TEXT,
    holder_thumbprint   TEXT,
    issuer_kid          TEXT,
    mandate_expires_at  BIGINT,
    budget_micro        BIGINT NOT NULL DEFAULT 0,
    -- Charged attempts plus approval attempts whose gate is open or approved.
    committed_micro     BIGINT NOT NULL DEFAULT 0,
    attempt_count       INTEGER NOT NULL DEFAULT 0,
    proof_id            TEXT UNIQUE,
    CHECK (committed_micro >= 0 AND committed_micro <= budget_micro)
);

CREATE TABLE sandbox_attempts (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sandbox_sessions(id),
    seq             INTEGER NOT NULL,
    scenario        TEXT NOT NULL CHECK (scenario IN ('allowed', 'approval')),
    amount_micro    BIGINT NOT NULL CHECK (amount_micro > 0),
    request_digest  TEXT NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('charged', 'gated')),
    receipt         TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    UNIQUE (session_id, seq)
);

CREATE TABLE sandbox_gates (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sandbox_sessions(id),
    attempt_id      TEXT NOT NULL UNIQUE REFERENCES sandbox_attempts(id),
    seq             INTEGER NOT NULL,
    request_digest  TEXT NOT NULL,
    nonce           TEXT NOT NULL UNIQUE,
    -- expires_text is the timestamp exactly as the holder signs it.
    expires_text    TEXT NOT NULL,
    expires_at      BIGINT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('open', 'decided', 'expired')),
    decision_jws    TEXT,
    decision_sha256 TEXT UNIQUE,
    decided_outcome TEXT CHECK (decided_outcome IN ('approved', 'denied')),
    decided_at      BIGINT,
    UNIQUE (session_id, seq),
    CHECK ((state = 'decided') = (decision_jws IS NOT NULL))
);

CREATE TABLE sandbox_proofs (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL UNIQUE REFERENCES sandbox_sessions(id),
    proof       BLOB NOT NULL,
    created_at  BIGINT NOT NULL
);

-- The issuer and proof keys when the store is shared by replicas
-- (PostgreSQL); the embedded mode keeps them in the data directory.
CREATE TABLE sandbox_keys (
    name        TEXT PRIMARY KEY,
    private_jwk TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- Reference releases are immutable: a release id is the SHA-256 of its
-- manifest, and its files never change once written.
CREATE TABLE sandbox_release_files (
    release_id   TEXT NOT NULL,
    path         TEXT NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    body         BLOB NOT NULL,
    PRIMARY KEY (release_id, path)
);

CREATE TABLE sandbox_releases (
    id         TEXT PRIMARY KEY,
    proof_id   TEXT NOT NULL,
    manifest   BLOB NOT NULL,
    created_at BIGINT NOT NULL
);

-- The release the public hosts serve; the manifest turns "available" only
-- once this row points at a release whose files are all written.
CREATE TABLE sandbox_reference (
    singleton    INTEGER PRIMARY KEY CHECK (singleton = 1),
    release_id   TEXT NOT NULL REFERENCES sandbox_releases(id),
    published_at BIGINT NOT NULL
);
