package service

import (
	"log/slog"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// Service carries what operations need.
type Service struct {
	Store *store.Store
	Now   func() time.Time
	Log   *slog.Logger
	// BaseURL gives the public base URL for links in actions.
	BaseURL func() string
	// P are the providers launches drive.
	P Providers
	// Pause holds the launch runner at a step, for crash tests.
	Pause StepPause
	// Quotas bound each organisation; zero fields take DefaultQuotas.
	Quotas Quotas
}

// StepPause names launch steps at which the task runner stops and waits to
// be killed: After a step is saved, or Inside it, after its provider acted
// and before it is saved, the worst moment to die. Empty names never match.
type StepPause struct{ After, Inside string }

// New returns a Service.
func New(st *store.Store, now func() time.Time, log *slog.Logger) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{Store: st, Now: now, Log: log}
}

// usd renders micro-USD as a USD number. Rendering is the only place money
// meets a float.
func usd[T ~int64](m T) float64 { return float64(m) / 1e6 }

func usdPtr[T ~int64](m *T) *float64 {
	if m == nil {
		return nil
	}
	v := usd(*m)
	return &v
}

// microUSD parses a USD number from input. Inputs carry at most six
// decimals, which float64 represents closely enough that rounding recovers
// the exact integer.
func microUSD(v float64) int64 { return int64(money.FromUSD(v)) }

func bytesReader(s string) *strings.Reader { return strings.NewReader(s) }
