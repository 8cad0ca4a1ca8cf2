-- A bundle's manifest in pages. A page is a run of the manifest's entries
-- in path order (a JSON array, as a whole manifest was), stored once by the
-- SHA-256 of that JSON, whichever bundles share it. Where pages end is a
-- function of the entries alone (a path whose hash ends a page, or a page
-- grown to its cap), so the same files make the same pages however they
-- came, and a bundle made from another with one file changed rewrites one
-- page and copies the others' references.
CREATE TABLE manifest_pages (
    sha256     TEXT PRIMARY KEY,
    entries    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- The pages of a bundle, in order: a JSON array of {sha256, first, files,
-- bytes}. NULL for a bundle stored before pages, whose manifest column
-- holds its whole manifest; "[]" is left there for a paged bundle.
ALTER TABLE bundles ADD COLUMN pages TEXT;
