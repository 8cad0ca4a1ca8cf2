-- What a quote reads on every write, kept beside the row it locks anyway,
-- so that a quote need not query for it.
--
-- holds_expire_at: no held quote of the project expires before it (in
-- microseconds), so a write that locks the project looks for lapsed holds
-- only once that time has come. 0 (every project here before) means look
-- now; a look that finds no held quote left sets it far in the future.
ALTER TABLE projects ADD COLUMN holds_expire_at BIGINT NOT NULL DEFAULT 0;

-- A capped key's running count: at least what its quotes created since
-- cap_counted_since (microseconds) hold or spent, added as each is held.
-- Releases and lapsed holds are not taken off; a quote that the count
-- would refuse counts again exactly. NULL (every key here before, and a
-- key whose cap was just set) means count before use.
ALTER TABLE api_keys ADD COLUMN cap_spent_micro BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN cap_counted_since BIGINT;
