package httpapi

import (
	"testing"

	"github.com/pierhq/pier/models"
)

// A launch request keeps absent apart from empty where the domain does: an
// edge launch refuses any process field given, even empty.
func TestLaunchRequestKeepsAbsentApart(t *testing.T) {
	bnd, env, addons := "bnd_1", map[string]string{}, []models.LaunchRequestAddons{}
	r := launchRequest(models.LaunchRequest{Name: "site", Target: "edge", BundleId: &bnd})
	if r.Env != nil || r.Secrets != nil || r.Addons != nil || r.Run != nil || r.HealthCheck != nil || r.BundleID != "bnd_1" || r.Years != 0 {
		t.Fatalf("absent fields came through: %+v", r)
	}
	r = launchRequest(models.LaunchRequest{Name: "site", Target: "edge", Env: &env, Addons: &addons, HealthCheck: &models.HealthCheck{}})
	if r.Env == nil || r.Addons == nil || r.HealthCheck == nil {
		t.Fatalf("empty fields read as absent: %+v", r)
	}
}
