-- How many times content was deleted from blobs, ever. Nothing in the
-- server deletes a blob; content goes missing by hand or by a restore, and
-- a trigger (installed per engine with this migration, see engineSQL)
-- counts every such deletion here. A bundle records the count at which its
-- every content was last known stored (checked_losses): while the count is
-- unchanged, a launch need not read the bundle's manifest again to know
-- that nothing it names is lost. -1 is "never checked".
CREATE TABLE blob_losses (
    id INTEGER PRIMARY KEY,
    n  BIGINT NOT NULL
);
INSERT INTO blob_losses (id, n) VALUES (1, 0);

ALTER TABLE bundles ADD COLUMN checked_losses BIGINT NOT NULL DEFAULT -1;
-- The bundle it was made from, for a bundle made from a previous one plus
-- changes (upload_assets with baseBundleId).
ALTER TABLE bundles ADD COLUMN base_id TEXT;
