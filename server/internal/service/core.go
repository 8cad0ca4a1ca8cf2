package service

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

// Cost is one line of a receipt, in micro-USD.
type Cost struct {
	Item   string
	Amount money.MicroUSD
}

// timing is the service's clock, for the nouns that stamp what they do.
type timing struct{ clock func() time.Time }

// Now is the service's clock.
func (s timing) Now() time.Time { return s.clock() }

// links makes the public URLs of pages and answers.
type links struct{ baseURLFunc func() string }

// edge is what the nouns that serve hosts or queue tasks drive: the
// platform, and the log for what it refused.
type edge struct {
	platform Platform
	log      *slog.Logger
}

// limits are the operator's quotas.
type limits struct{ quotaLimits Quotas }

// enqueue hands a committed task to the durable runner. A lost enqueue is
// not lost work: the runner's sweep finds the queued task after a restart.
func (s edge) enqueue(ctx context.Context, taskID, what string) {
	if err := s.platform.Enqueue(ctx, taskID); err != nil {
		s.log.Warn("enqueue "+what, "task", taskID, "err", err)
	}
}

// ApprovalURL is where a human decides a gate. It carries the gate id and
// no authority: the page acts only for a signed-in human of the same
// organisation.
func (s links) ApprovalURL(gateID string) string {
	return s.baseURL() + "/approvals/" + gateID
}

func (s links) baseURL() string {
	if s.baseURLFunc != nil {
		return s.baseURLFunc()
	}
	return ""
}

// ReviewURL is the page a signup's human opens.
func (s links) ReviewURL(token string) string { return s.baseURL() + "/signup/" + token }

func (s limits) quotas() Quotas {
	q := s.quotaLimits
	d := DefaultQuotas
	if q.Services <= 0 {
		q.Services = d.Services
	}
	if q.Bundles <= 0 {
		q.Bundles = d.Bundles
	}
	if q.StorageBytes <= 0 {
		q.StorageBytes = d.StorageBytes
	}
	return q
}

// previews names preview hosts under the preview domain.
type previews struct{ previewDomain string }

// PreviewHost is <service>--<project>.<preview domain>; underscores in ids
// become hyphens so the label is a valid host name.
func (s previews) PreviewHost(service, projectID string) string {
	return service + "--" + strings.ReplaceAll(strings.ToLower(projectID), "_", "-") + "." + s.previewDomain
}

func (s edge) hostURL(scheme, host string) string {
	httpPort, port := s.platform.Ports()
	if scheme == "http" {
		port = httpPort
	}
	if port == "" || port == "443" && scheme == "https" || port == "80" && scheme == "http" {
		return scheme + "://" + host + "/"
	}
	return scheme + "://" + host + ":" + port + "/"
}

func (s edge) invalidate(hosts ...string) {
	var all []string
	for _, h := range hosts {
		if h != "" {
			all = append(all, h, "www."+h)
		}
	}
	s.platform.InvalidateHosts(all...)
}

// SignInURL is the one-time link for a sign-in token.
func (s links) SignInURL(token string) string { return s.baseURL() + "/signin/" + token }

// BillingURL is the card page of a flow. Like an approval URL it carries
// an id and no authority.
func (s links) BillingURL(id string) string { return s.baseURL() + "/billing/" + id }
