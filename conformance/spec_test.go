package conformance

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// specRules is SPEC.md's outline: each numbered section with the count of
// its numbered rules (0 for a section without any). The runner never reads
// SPEC.md itself; this copy only keeps the probes' references honest.
var specRules = map[string]int{
	"1": 0, "2": 0,
	"2.1": 0, "2.2": 0, "2.3": 0, "2.4": 0, "2.5": 0, "2.6": 0, "2.7": 0, "2.8": 0, "2.9": 0, "2.10": 0, "2.11": 0,
	"3": 3, "4": 4, "5": 0, "6": 0, "7": 6, "8": 0, "9": 6,
}

var specRef = regexp.MustCompile(`^§(\d+(?:\.\d+)?)(?: rule (\d+))?$`)

// TestProbeSpecReferences: every probe cites SPEC.md, as "SPEC.md §N",
// "SPEC.md §N rule M" or a list of those, optionally followed by a
// parenthesised note, and every section and rule it names exists.
func TestProbeSpecReferences(t *testing.T) {
	seen := map[string]bool{}
	for suite, probes := range map[string][]probe{SuiteWire: wireProbes, SuiteDiscovery: discoveryProbes, SuiteGoverned: governedProbes} {
		for _, p := range probes {
			if !strings.HasPrefix(p.id, suite+".") || seen[p.id] {
				t.Errorf("probe id %q: not unique or not under suite %s", p.id, suite)
			}
			seen[p.id] = true
			if !strings.HasPrefix(p.spec, "SPEC.md §") {
				t.Errorf("%s: spec %q does not start with \"SPEC.md §\"", p.id, p.spec)
				continue
			}
			if len(p.spec) > 200 {
				t.Errorf("%s: spec is %d characters; the schema allows 200", p.id, len(p.spec))
			}
			refs, _, _ := strings.Cut(strings.TrimPrefix(p.spec, "SPEC.md "), " (")
			for _, ref := range strings.Split(refs, ", ") {
				m := specRef.FindStringSubmatch(ref)
				if m == nil {
					t.Errorf("%s: %q in %q is not §N or §N rule M", p.id, ref, p.spec)
					continue
				}
				rules, ok := specRules[m[1]]
				if !ok {
					t.Errorf("%s: SPEC.md has no §%s", p.id, m[1])
					continue
				}
				if m[2] != "" {
					if n, _ := strconv.Atoi(m[2]); n < 1 || n > rules {
						t.Errorf("%s: SPEC.md §%s has no rule %s", p.id, m[1], m[2])
					}
				}
			}
		}
	}
	// A suite that does not run still names each probe's reference.
	for _, p := range notRunSuite(SuiteGoverned, governedProbes).Probes {
		if p.Spec == nil || !strings.HasPrefix(*p.Spec, "SPEC.md §") {
			t.Errorf("not_run %s: spec %v", p.Id, p.Spec)
		}
	}
}
