-- Mail for owned domains: the DKIM key (kept here, never shown), the
-- addresses and the inboxes they deliver to, and received messages. Raw
-- messages and attachments are blobs, by content.
CREATE TABLE mail_domains (
    domain      TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    selector    TEXT NOT NULL,
    private_key TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    state       TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE inboxes (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    address     TEXT NOT NULL,
    bytes_used  BIGINT NOT NULL DEFAULT 0,
    bytes_limit BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    CHECK (bytes_used <= bytes_limit)
);
CREATE INDEX inboxes_org ON inboxes(org_id, created_at);

CREATE TABLE email_addresses (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    domain     TEXT NOT NULL,
    address    TEXT NOT NULL,
    catch_all  INTEGER NOT NULL DEFAULT 0,
    inbox_id   TEXT NOT NULL REFERENCES inboxes(id),
    created_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE UNIQUE INDEX email_addresses_live ON email_addresses(address) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX email_addresses_catch_all ON email_addresses(domain) WHERE catch_all = 1 AND deleted_at IS NULL;
CREATE INDEX email_addresses_org ON email_addresses(org_id, created_at);

CREATE TABLE messages (
    id          TEXT PRIMARY KEY,
    inbox_id    TEXT NOT NULL REFERENCES inboxes(id),
    org_id      TEXT NOT NULL,
    mail_from   TEXT NOT NULL,
    rcpt        TEXT NOT NULL,
    from_header TEXT NOT NULL,
    subject     TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    size        BIGINT NOT NULL,
    headers     TEXT NOT NULL,
    text_body   TEXT NOT NULL,
    html_body   TEXT NOT NULL,
    attachments TEXT NOT NULL,
    auth        TEXT NOT NULL,
    raw_sha256  TEXT NOT NULL
);
CREATE INDEX messages_inbox ON messages(inbox_id, received_at, id);

-- A proposed registrant waits for the person to confirm from the link sent
-- to their address; the sandbox registrar's record is the confirmed one.
CREATE TABLE registrant_contacts (
    domain       TEXT NOT NULL,
    org_id       TEXT NOT NULL REFERENCES organizations(id),
    contact      TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    task_id      TEXT NOT NULL,
    state        TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    confirmed_at BIGINT,
    PRIMARY KEY (domain, task_id)
);
