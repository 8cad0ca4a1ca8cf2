-- Rate limits shared by every replica on one database: a GCRA theoretical
-- arrival time per bucket, moved forward atomically per request.
CREATE TABLE rate_limits (
    key TEXT PRIMARY KEY,
    tat BIGINT NOT NULL
);
