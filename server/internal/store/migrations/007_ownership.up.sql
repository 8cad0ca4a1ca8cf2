-- Ownership is a fact in the store.
--
-- A service's preview host is no longer unique across history, only among
-- the services that hold it now (service_hosts below): a torn-down or
-- failed service gives its name and its hosts back. SQLite cannot drop a
-- column's UNIQUE, so the table is rebuilt; nothing references it.
CREATE TABLE services_v2 (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES organizations(id),
    project_id   TEXT NOT NULL REFERENCES projects(id),
    name         TEXT NOT NULL,
    target       TEXT NOT NULL,
    preview_host TEXT NOT NULL,
    domain       TEXT,
    bundle_id    TEXT,
    state        TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
INSERT INTO services_v2 (id, org_id, project_id, name, target, preview_host, domain, bundle_id, state, task_id, created_at, updated_at)
    SELECT id, org_id, project_id, name, target, preview_host, domain, bundle_id, state, task_id, created_at, updated_at FROM services;
DROP TABLE services;
ALTER TABLE services_v2 RENAME TO services;
CREATE UNIQUE INDEX services_project_name ON services(project_id, name) WHERE state NOT IN ('torn_down', 'failed');
CREATE INDEX services_domain ON services(domain);
CREATE INDEX services_preview_host ON services(preview_host);

-- One owner per host name: a preview host, a domain or www. under it maps
-- to at most one service. The row is taken when the launch is accepted
-- (inside its transaction) and given back when the service fails, is torn
-- down, or a human denies its domain.
CREATE TABLE service_hosts (
    host       TEXT PRIMARY KEY,
    service_id TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX service_hosts_service ON service_hosts(service_id);

-- Existing services keep their preview hosts, and their domains where the
-- organisation bought the domain; a domain attached without a purchase was
-- never theirs to serve.
INSERT INTO service_hosts (host, service_id, org_id, created_at)
    SELECT preview_host, id, org_id, updated_at FROM services WHERE state NOT IN ('torn_down', 'failed');
INSERT INTO service_hosts (host, service_id, org_id, created_at)
    SELECT s.domain, s.id, s.org_id, s.updated_at FROM services s JOIN registrar_purchases p ON p.domain = s.domain AND p.org_id = s.org_id
    WHERE s.state NOT IN ('torn_down', 'failed') AND s.domain IS NOT NULL
      AND s.created_at = (SELECT MIN(o.created_at) FROM services o WHERE o.domain = s.domain AND o.org_id = s.org_id AND o.state NOT IN ('torn_down', 'failed'));
INSERT INTO service_hosts (host, service_id, org_id, created_at)
    SELECT 'www.' || h.host, h.service_id, h.org_id, h.created_at FROM service_hosts h JOIN services s ON s.id = h.service_id WHERE h.host = s.domain;

-- A domain being bought: claimed when a launch that buys it is accepted,
-- given back when that launch fails or a human denies the purchase. With
-- registrar_purchases (a domain is sold once) this is what availability
-- reads, whichever organisation holds the claim or the sale.
CREATE TABLE domain_claims (
    domain     TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX domain_claims_task ON domain_claims(task_id);

-- A quote a human approved: launch consumes it without asking again.
ALTER TABLE quotes ADD COLUMN approved_by TEXT;
