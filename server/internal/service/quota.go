package service

import (
	"context"
	"fmt"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
)

// Quotas bound what one organisation stores and runs, whatever its
// budget: live services, bundles, and the bytes its bundles hold.
type Quotas struct {
	Services     int
	Bundles      int
	StorageBytes int64
}

// DefaultQuotas are the defaults per organisation.
var DefaultQuotas = Quotas{Services: 100, Bundles: 1000, StorageBytes: 5 << 30}

func (s *Service) quotas() Quotas {
	q := s.Quotas
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

// checkServiceQuota refuses a launch that would pass the organisation's
// live-service quota.
func (s *Service) checkServiceQuota(ctx context.Context, orgID string) error {
	u, err := s.Store.Accounts().Usage(ctx, orgID)
	if err != nil {
		return apierr.Internal(err)
	}
	if q := s.quotas(); u.Services >= q.Services {
		return apierr.Newf("quota:services", "your organisation has %d live services, its quota; tear one down before launching another", u.Services).
			WithActions(actions.Tool("teardown_service", "agent", nil), actions.Manual(sdk.ContactOperator, "human"))
	}
	return nil
}

// checkBundleQuota refuses an upload that would pass the organisation's
// bundle or storage quota.
func (s *Service) checkBundleQuota(ctx context.Context, orgID string, addBytes int64) error {
	u, err := s.Store.Accounts().Usage(ctx, orgID)
	if err != nil {
		return apierr.Internal(err)
	}
	q := s.quotas()
	if u.Bundles >= q.Bundles {
		return apierr.Newf("quota:bundles", "your organisation stores %d bundles, its quota; ask the operator to raise it", u.Bundles).
			WithActions(actions.Manual(sdk.ContactOperator, "human"))
	}
	if u.BundleBytes+addBytes > q.StorageBytes {
		return apierr.Newf("quota:storage", "this bundle would bring your organisation's bundles to %d bytes; the quota is %d", u.BundleBytes+addBytes, q.StorageBytes).
			WithActions(actions.Manual(sdk.ContactOperator, "human")).
			WithDetails(sdk.FieldProblem{Field: "body.files", Problem: fmt.Sprintf("%d bytes over the storage quota", u.BundleBytes+addBytes-q.StorageBytes)})
	}
	return nil
}
