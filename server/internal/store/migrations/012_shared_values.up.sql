-- Values replicas behind one balancer share: ACME challenges in progress
-- and the certificates obtained.
CREATE TABLE shared_values (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
