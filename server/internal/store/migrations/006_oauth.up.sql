-- OAuth 2.1 for MCP clients. Clients register themselves (RFC 7591) and are
-- public: they hold no secret. Every secret below (authorization codes,
-- access and refresh tokens) is kept only as a SHA-256 hash.
CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL, -- newline-separated
    created_at    BIGINT NOT NULL
);

-- An authorization request waiting for a human's consent, then the code it
-- yielded. status moves pending -> approved -> exchanged, or pending ->
-- denied, each step a compare-and-set; the code works once.
CREATE TABLE oauth_authorizations (
    id              TEXT PRIMARY KEY,
    client_id       TEXT NOT NULL REFERENCES oauth_clients(id),
    redirect_uri    TEXT NOT NULL,
    scopes          TEXT NOT NULL, -- requested, space-separated
    client_state    TEXT NOT NULL DEFAULT '',
    code_challenge  TEXT NOT NULL,
    resource        TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'exchanged')),
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    decided_at      BIGINT,
    grant_id        TEXT,
    code_hash       TEXT UNIQUE,
    code_expires_at BIGINT
);

-- What a human approved for a client in one organisation: the scopes and
-- the audience. Every token descends from one grant; revoking the grant
-- (or detecting a replayed refresh token) ends them all.
CREATE TABLE oauth_grants (
    id            TEXT PRIMARY KEY,
    client_id     TEXT NOT NULL REFERENCES oauth_clients(id),
    org_id        TEXT NOT NULL REFERENCES organizations(id),
    human_id      TEXT NOT NULL REFERENCES humans(id),
    scopes        TEXT NOT NULL,
    resource      TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    revoke_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX oauth_grants_org ON oauth_grants(org_id, created_at);

-- Access and refresh tokens. An access token may carry fewer scopes than
-- its grant, when a refresh asked for fewer. A refresh token is spent once (rotated_at);
-- presenting it again revokes its grant.
CREATE TABLE oauth_tokens (
    token_hash TEXT PRIMARY KEY,
    grant_id   TEXT NOT NULL REFERENCES oauth_grants(id),
    kind       TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    scopes     TEXT NOT NULL, -- a subset of the grant's
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    rotated_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);
