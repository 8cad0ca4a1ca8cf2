-- A person may cap what one agent key spends: cap_micro per period, where
-- 'month' is the calendar month in UTC and 'lifetime' is the key's whole
-- life; NULL is no cap. Only the keys page and the operator's command
-- write it: no agent credential reaches either.
ALTER TABLE api_keys ADD COLUMN cap_micro BIGINT CHECK (cap_micro IS NULL OR cap_micro >= 0);
ALTER TABLE api_keys ADD COLUMN cap_period TEXT NOT NULL DEFAULT 'month' CHECK (cap_period IN ('month', 'lifetime'));
-- What a key has spent in a period is the sum of its held and consumed
-- quotes since the period began.
CREATE INDEX quotes_key_created ON quotes(key_id, created_at);
