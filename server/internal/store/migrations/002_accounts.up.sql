-- Projects hold the money. The CHECK is the last line of defence against
-- overspending: spent plus active holds can never pass the limit, whatever
-- the code above it does.
CREATE TABLE projects (
    id                 TEXT PRIMARY KEY,
    org_id             TEXT NOT NULL REFERENCES organizations(id),
    name               TEXT NOT NULL,
    budget_limit_micro BIGINT NOT NULL CHECK (budget_limit_micro >= 0),
    spent_micro        BIGINT NOT NULL DEFAULT 0 CHECK (spent_micro >= 0),
    held_micro         BIGINT NOT NULL DEFAULT 0 CHECK (held_micro >= 0),
    policy             TEXT NOT NULL,
    created_at         BIGINT NOT NULL,
    CHECK (spent_micro + held_micro <= budget_limit_micro)
);
CREATE INDEX projects_org ON projects(org_id);

CREATE TABLE quotes (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES organizations(id),
    project_id   TEXT NOT NULL REFERENCES projects(id),
    key_id       TEXT NOT NULL,
    decision     TEXT NOT NULL CHECK (decision IN ('ALLOW', 'DENY', 'REQUIRES_APPROVAL')),
    state        TEXT NOT NULL CHECK (state IN ('held', 'consumed', 'released', 'expired', 'not_held')),
    amount_micro BIGINT NOT NULL CHECK (amount_micro >= 0),
    items        TEXT NOT NULL,
    reasons      TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    settled_at   BIGINT
);
CREATE INDEX quotes_project_state ON quotes(project_id, state, expires_at);

CREATE TABLE tasks (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    project_id TEXT,
    kind       TEXT NOT NULL,
    state      TEXT NOT NULL,
    steps      TEXT NOT NULL,
    gate_id    TEXT,
    result     TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX tasks_org ON tasks(org_id, created_at);

-- A gate waits for one human decision. Its id travels in approval URLs and
-- carries no authority: deciding needs a signed-in human of the same org.
CREATE TABLE gates (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    task_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    decided_by  TEXT,
    decided_at  BIGINT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX gates_org_state ON gates(org_id, state);

-- The audit ledger: append-only, one chain per organisation.
CREATE TABLE ledger (
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    seq         BIGINT NOT NULL,
    at          TEXT NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    details     TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (org_id, seq)
);
