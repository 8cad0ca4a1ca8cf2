-- Prepared workflows: the canonical plan bytes, their digest and signature.
-- Applying sets task_id once, by compare-and-set; every later apply finds
-- it and replays.
CREATE TABLE workflows (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    project_id  TEXT NOT NULL REFERENCES projects(id),
    caller      TEXT NOT NULL,
    digest      TEXT NOT NULL,
    plan        TEXT NOT NULL,
    signed_plan TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    projection  TEXT NOT NULL,
    task_id     TEXT,
    created_at  BIGINT NOT NULL,
    applied_at  BIGINT
);
CREATE INDEX workflows_org ON workflows(org_id, created_at);
