// Package pgaddon is the managed PostgreSQL add-on: a database and a role
// of its own per service, created through an administrator's connection,
// dumped with pg_dump before it is dropped.
package pgaddon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Provider creates, dumps and drops service databases on one server.
type Provider struct {
	admin *url.URL
}

// New checks the administrator URL (postgres://USER:PASSWORD@HOST:PORT/DB
// or with host=/socket/dir) and returns a provider on it.
func New(adminURL string) (*Provider, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("pgaddon: %q is not a postgres:// URL", adminURL)
	}
	return &Provider{admin: u}, nil
}

var nameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
})

func check(name string) error {
	if !nameRE().MatchString(name) {
		return fmt.Errorf("pgaddon: %q is not a plain database name", name)
	}
	return nil
}

func (p *Provider) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, p.admin.String())
}

// Create makes the role and the database it owns; both may already exist.
func (p *Provider) Create(ctx context.Context, name, password string) error {
	if err := check(name); err != nil {
		return err
	}
	c, err := p.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, name).Scan(&n); err != nil {
		return err
	}
	quoted := pgx.Identifier{name}.Sanitize()
	if n == 0 {
		if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, quoted, strings.ReplaceAll(password, "'", "''"))); err != nil {
			return err
		}
	} else if _, err := c.Exec(ctx, fmt.Sprintf(`ALTER ROLE %s LOGIN PASSWORD '%s'`, quoted, strings.ReplaceAll(password, "'", "''"))); err != nil {
		return err
	}
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s OWNER %s`, quoted, quoted)); err != nil {
			return err
		}
	}
	// Nobody but its owner (and the administrator) connects to it.
	if _, err = c.Exec(ctx, fmt.Sprintf(`REVOKE ALL ON DATABASE %s FROM PUBLIC`, quoted)); err != nil {
		return err
	}
	return p.hideCatalog(ctx, name)
}

// sharedCatalog are the views of the whole server every database shows
// its users by default: the names of every database and role, and what
// other sessions connect to.
var sharedCatalog = []string{"pg_database", "pg_roles", "pg_user", "pg_authid", "pg_shdescription", "pg_stat_database",
	"pg_stat_database_conflicts", "pg_stat_activity", "pg_stat_ssl", "pg_stat_gssapi", "pg_auth_members", "pg_shadow", "pg_group"}

// hideCatalog takes from the service's role, in its own database, the
// right to read the catalogs that list other services' databases and
// roles.
func (p *Provider) hideCatalog(ctx context.Context, name string) error {
	u := *p.admin
	u.Path = "/" + name
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, t := range sharedCatalog {
		if _, err := c.Exec(ctx, fmt.Sprintf(`REVOKE ALL ON pg_catalog.%s FROM PUBLIC`, t)); err != nil {
			return fmt.Errorf("pgaddon: hiding %s: %w", t, err)
		}
	}
	return nil
}

// URL is the connection URL the service gets as DATABASE_URL.
func (p *Provider) URL(name, password string) string {
	u := *p.admin
	u.User = url.UserPassword(name, password)
	u.Path = "/" + name
	return u.String()
}

// Endpoint is where the server listens, as Pier reaches it: a TCP
// host:port, or the Unix socket of a host=/dir URL.
func (p *Provider) Endpoint() (network, address string) {
	port := p.admin.Port()
	if port == "" {
		port = p.admin.Query().Get("port")
	}
	if port == "" {
		port = "5432"
	}
	if dir := p.admin.Query().Get("host"); strings.HasPrefix(dir, "/") {
		return "unix", filepath.Join(dir, ".s.PGSQL."+port)
	}
	host := p.admin.Hostname()
	if host == "" {
		host = "localhost"
	}
	return "tcp", net.JoinHostPort(host, port)
}

// URLAt is the connection URL of a service that reaches the server at
// addr (host:port), not where Pier does.
func (p *Provider) URLAt(name, password, addr string) string {
	u := *p.admin
	u.User = url.UserPassword(name, password)
	u.Host = addr
	u.Path = "/" + name
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.RawQuery = q.Encode()
	return u.String()
}

// Dump is a plain-SQL pg_dump of the database, taken as the administrator.
func (p *Provider) Dump(ctx context.Context, name string) ([]byte, error) {
	if err := check(name); err != nil {
		return nil, err
	}
	bin, err := pgDump()
	if err != nil {
		return nil, err
	}
	u := *p.admin
	u.Path = "/" + name
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--no-owner", "--no-privileges", "--format=plain", "--dbname="+u.String())
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pg_dump: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

// pgDump finds pg_dump: on the PATH, or the newest of Debian's versioned
// installs.
func pgDump() (string, error) {
	if p, err := exec.LookPath("pg_dump"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	sort.Strings(found)
	if len(found) > 0 {
		return found[len(found)-1], nil
	}
	return "", errors.New("pgaddon: pg_dump is not installed (Debian: apt-get install postgresql-client)")
}

// Drop removes the database (closing its connections) and its role.
func (p *Provider) Drop(ctx context.Context, name string) error {
	if err := check(name); err != nil {
		return err
	}
	c, err := p.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	quoted := pgx.Identifier{name}.Sanitize()
	if _, err := c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, quoted)); err != nil {
		return err
	}
	_, err = c.Exec(ctx, fmt.Sprintf(`DROP ROLE IF EXISTS %s`, quoted))
	return err
}
