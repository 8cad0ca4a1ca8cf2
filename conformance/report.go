package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"github.com/gowebpki/jcs"

	"github.com/pierhq/pier/sdk"
)

// Report is a v2 run report.
type Report = sdk.ConformanceRunReportV2

// Schema versions a report may carry (SPEC.md §9 rule 1).
const (
	SchemaV1 = "service.conformance.run.v1"
	SchemaV2 = "service.conformance.run.v2"
)

// Suite ids, in report order.
const (
	SuiteWire      = "wire"
	SuiteDiscovery = "discovery"
	SuiteGoverned  = "governed"
)

// Profiles.
const (
	ProfileAnonymous = "anonymous"
	ProfileGoverned  = "governed"
)

// Probe and suite states (SPEC.md §3).
const (
	Pass   = "pass"
	Fail   = "fail"
	Skip   = "skip"
	NotRun = "not_run"
)

// Digest is the lowercase hex SHA-256 of the report's RFC 8785 canonical
// form, so that reformatting a report file does not change it.
func Digest(report []byte) (string, error) {
	canon, err := jcs.Transform(report)
	if err != nil {
		return "", fmt.Errorf("conformance: canonicalize: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Marshal renders a report as indented JSON, the form written to files.
func Marshal(r *Report) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SuiteOutcome is a suite's outcome from its probes: not_run when none
// ran, fail when any failed, and pass otherwise (skips do not fail a
// suite).
func SuiteOutcome(probes []sdk.ConformanceProbe) sdk.ConformanceSuiteOutcome {
	ran, failed := false, false
	for _, p := range probes {
		switch p.Status {
		case Fail:
			failed, ran = true, true
		case Pass, Skip:
			ran = true
		}
	}
	switch {
	case !ran:
		return NotRun
	case failed:
		return Fail
	}
	return Pass
}

// Summarize counts probes over every suite: passed and failed by status,
// skipped for skip and not_run alike. The outcome is pass only when every
// required suite passed; a required suite that did not run fails the run.
func Summarize(suites []sdk.ConformanceSuite) sdk.ConformanceSummary {
	var s sdk.ConformanceSummary
	s.Outcome = Pass
	for _, suite := range suites {
		for _, p := range suite.Probes {
			switch p.Status {
			case Pass:
				s.Passed++
			case Fail:
				s.Failed++
			default:
				s.Skipped++
			}
		}
		if suite.Required && suite.Outcome != Pass {
			s.Outcome = Fail
		}
	}
	return s
}

// Holders a governed probe may act as (SPEC.md §5). A simulated holder is
// a headless or CI holder key: it proves control of the key, not human
// review, and never counts toward the human-separation claim.
const (
	HolderNone      = "none"
	HolderSimulated = "simulated"
	HolderHuman     = "human"
)

// holderNote is the note a governed probe's spec ends with.
func holderNote(holder string) string { return " (holder: " + holder + ")" }

// holderNoteRE is compiled on first use, not at every pier command's start.
var holderNoteRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\(holder: (none|simulated|human)\)$`)
})

// ProbeHolder is the holder a probe records in its spec note, "" when it
// records none (a v1 report, or one from an older runner).
func ProbeHolder(p sdk.ConformanceProbe) string {
	if p.Spec == nil {
		return ""
	}
	if m := holderNoteRE().FindStringSubmatch(*p.Spec); m != nil {
		return m[1]
	}
	return ""
}

// HumanSeparation reports whether a report supports the human-separation
// claim: some governed probe that passed records a human holder. A probe
// with a simulated holder never counts, whatever it shows.
func HumanSeparation(suites []sdk.ConformanceSuite) bool {
	for _, s := range suites {
		if s.Id != SuiteGoverned {
			continue
		}
		for _, p := range s.Probes {
			if p.Status == Pass && ProbeHolder(p) == HolderHuman {
				return true
			}
		}
	}
	return false
}
