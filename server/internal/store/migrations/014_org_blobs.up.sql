-- Which organisation uploaded which content. Blobs are shared across
-- organisations (one row per distinct content), so "already uploaded" in a
-- digest upload must mean uploaded by this organisation: answering from
-- the shared table would tell one organisation what another has stored.
-- Rows are written when an organisation uploads content, inline or by
-- digest; content uploaded before this table existed is asked for once more.
-- The size is the content's, kept here so that a manifest's check reads
-- this table and the blobs' key, never a blob row.
CREATE TABLE org_blobs (
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    sha256     TEXT NOT NULL,
    size       BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, sha256)
);
