package httpapi

import (
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func deref[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// val is *p, or T's zero value for nil: an optional parameter's value.
func val[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// page reads a list operation's cursor, refused when it does not decode,
// and limit into the store's filter.
func page(cursor *string, limit *int) (store.Filter, error) {
	after, err := service.ParseCursor(deref(cursor))
	if err != nil {
		return store.Filter{}, err
	}
	return store.Filter{Limit: val(limit), After: after}, nil
}

// operations implements the strict server interface by calling the
// service, one embedded type per resource. The operations a later release
// serves fall through to Unimplemented, which sits one level deeper so
// that every served operation overrides it.
type operations struct {
	bundleRoutes
	domainRoutes
	mailRoutes
	onboardingRoutes
	projectRoutes
	quoteRoutes
	sandboxRoutes
	serviceRoutes
	taskRoutes
	workflowRoutes
	fallback
}

type fallback struct{ Unimplemented }

// deps is what every resource's routes share.
type deps struct {
	svc *service.Service
	cfg *Config
}

type (
	bundleRoutes     struct{ *deps }
	domainRoutes     struct{ *deps }
	mailRoutes       struct{ *deps }
	onboardingRoutes struct{ *deps }
	projectRoutes    struct{ *deps }
	quoteRoutes      struct{ *deps }
	sandboxRoutes    struct{ *deps }
	serviceRoutes    struct{ *deps }
	taskRoutes       struct{ *deps }
	workflowRoutes   struct{ *deps }
)

func newOperations(svc *service.Service, cfg *Config) *operations {
	d := &deps{svc: svc, cfg: cfg}
	return &operations{
		bundleRoutes: bundleRoutes{d}, domainRoutes: domainRoutes{d}, mailRoutes: mailRoutes{d}, onboardingRoutes: onboardingRoutes{d},
		projectRoutes: projectRoutes{d}, quoteRoutes: quoteRoutes{d}, sandboxRoutes: sandboxRoutes{d},
		serviceRoutes: serviceRoutes{d}, taskRoutes: taskRoutes{d}, workflowRoutes: workflowRoutes{d},
	}
}

var _ api.StrictServerInterface = (*operations)(nil)
