package httpapi

import (
	"testing"

	"github.com/pierhq/pier/server/internal/service"
)

// A crashed service's relaunch action carries its bundle, which the server
// knows: its hint has no placeholder to fill.
func TestCrashedRelaunchCarriesTheBundle(t *testing.T) {
	acts := serviceActions(&service.ServiceView{ID: "svc_1", ProjectID: "prj_1", Name: "api", Target: "process", State: service.ServiceCrashed,
		TaskID: "tsk_1", BundleID: "bnd_1", Version: 1})
	for _, a := range acts {
		ta, err := a.AsToolAction()
		if err != nil || ta.Tool != "launch_service" {
			continue
		}
		if (*ta.Arguments)["bundleId"] != "bnd_1" || ta.MissingArguments != nil && len(*ta.MissingArguments) > 0 {
			t.Fatalf("relaunch action: %+v", ta)
		}
		return
	}
	t.Fatal("no relaunch action for a crashed service")
}
