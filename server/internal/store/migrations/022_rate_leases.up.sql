-- A replica takes a batch of tokens from a shared bucket in one statement
-- (RateLimits.TakeUpTo), which records how many it got.
ALTER TABLE rate_limits ADD COLUMN taken BIGINT NOT NULL DEFAULT 0;
