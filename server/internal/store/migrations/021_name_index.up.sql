-- The replicas' in-memory name indexes (server/internal/nameindex) read,
-- every second, the hosts and zones added since the newest they have seen.
CREATE INDEX service_hosts_created ON service_hosts(created_at);
CREATE INDEX zones_updated ON zones(updated_at);
