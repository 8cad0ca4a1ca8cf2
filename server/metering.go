package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/pierhq/pier/server/internal/service"
)

// meterLoop runs the meter's pass at start and every interval. It is a
// plain loop on every replica rather than a River periodic job: River on
// SQLite stops when idle, and the pass needs no job of its own to be
// durable, since what it owes is read from the database each time and
// each (service, period) charge has a unique key. A pass killed midway
// commits nothing of the project it was settling; the next one does it.
func meterLoop(ctx context.Context, meter *service.Meter, interval time.Duration, log *slog.Logger) {
	if interval < 0 {
		return
	}
	if interval == 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := meter.MeterPass(ctx); err != nil && ctx.Err() == nil {
			log.Warn("metering pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
