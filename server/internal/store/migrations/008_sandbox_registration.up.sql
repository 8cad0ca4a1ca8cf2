-- The holder registers a session's mandate with a secret returned once to
-- the session's creator; the store keeps its SHA-256. Sessions made before
-- it have none and take no mandate.
ALTER TABLE sandbox_sessions ADD COLUMN registration_hash TEXT NOT NULL DEFAULT '';
