package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/pierhq/pier/sdk"
)

// Options configure a run.
type Options struct {
	// BaseURL is the deployment under test.
	BaseURL string
	// Profile is anonymous or governed.
	Profile string
	// APIKey authenticates the governed suite; required in that profile.
	APIKey string
	// ProjectID is the project the governed suite's throwaway project is
	// carved from: it quotes and launches in a child project of it, which
	// it deletes at the end. Empty means the key's first project.
	ProjectID string
	// ThrowawayBudgetUSD is the throwaway project's budget, taken from
	// ProjectID's remaining budget and given back when it is deleted;
	// 0 means DefaultThrowawayBudgetUSD (or less, when less is left).
	ThrowawayBudgetUSD float64
	// PreviousDigest links the report to the one before it; nil starts a
	// chain.
	PreviousDigest *string
	// HTTPClient makes every request; nil means a client with a 30 s
	// timeout.
	HTTPClient *http.Client
	// Getenv reads the CI environment for the runner block; nil means
	// os.Getenv.
	Getenv func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Progress, when set, hears of each probe as it finishes.
	Progress func(suite string, p sdk.ConformanceProbe)
	// Say, when set, hears what the run does to the organisation: the
	// throwaway project it created and removed, or, when removing it
	// failed, what is left in it and the command that removes it.
	Say func(what string)
}

// Run runs the three suites against the deployment and returns the
// report. Failing probes do not make Run fail; only a report that cannot
// be made at all (a bad profile, a governed run without a key) does.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Profile != ProfileAnonymous && o.Profile != ProfileGoverned {
		return nil, fmt.Errorf("conformance: profile must be %s or %s", ProfileAnonymous, ProfileGoverned)
	}
	if o.Profile == ProfileGoverned && o.APIKey == "" {
		return nil, errors.New("conformance: the governed profile needs an API key")
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("conformance: base URL %q is not an http(s) URL", o.BaseURL)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &runner{o: o, base: strings.TrimRight(o.BaseURL, "/")}
	started := o.Now().UTC().Truncate(time.Millisecond)

	suites := []sdk.ConformanceSuite{
		r.suite(ctx, SuiteWire, true, wireProbes),
		r.suite(ctx, SuiteDiscovery, true, discoveryProbes),
	}
	if o.Profile == ProfileGoverned {
		suites = append(suites, r.governed(ctx))
	} else {
		suites = append(suites, notRunSuite(SuiteGoverned, governedProbes))
	}

	rep := &Report{
		SchemaVersion:  SchemaV2,
		Profile:        sdk.ConformanceRunReportV2Profile(o.Profile),
		RunId:          runID(o.Getenv, started),
		Runner:         runnerInfo(o.Getenv),
		Target:         r.target(),
		StartedAt:      started,
		CompletedAt:    o.Now().UTC().Truncate(time.Millisecond),
		Suites:         suites,
		Summary:        Summarize(suites),
		PreviousDigest: o.PreviousDigest,
	}
	return rep, nil
}

// probe is one check. It returns nil to pass, errSkip to skip, or an
// error to fail; the request helpers record the HTTP status.
type probe struct {
	id   string
	spec string
	run  func(ctx context.Context, r *runner, p *probeRun) error
}

type probeRun struct {
	status int
	// want429 turns off the client's own 429 backoff.
	want429 bool
}

// errSkip marks a probe whose precondition the target does not offer.
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

func (r *runner) suite(ctx context.Context, id string, required bool, probes []probe) sdk.ConformanceSuite {
	s := sdk.ConformanceSuite{Id: sdk.ConformanceSuiteId(id), Required: required, Probes: []sdk.ConformanceProbe{}}
	for _, pr := range probes {
		s.Probes = append(s.Probes, r.runProbe(ctx, id, pr))
	}
	s.Outcome = SuiteOutcome(s.Probes)
	return s
}

func notRunSuite(id string, probes []probe) sdk.ConformanceSuite {
	s := sdk.ConformanceSuite{Id: sdk.ConformanceSuiteId(id), Required: false, Outcome: NotRun, Probes: []sdk.ConformanceProbe{}}
	for _, pr := range probes {
		spec := pr.spec
		s.Probes = append(s.Probes, sdk.ConformanceProbe{Id: pr.id, Status: NotRun, Spec: &spec})
	}
	return s
}

func (r *runner) runProbe(ctx context.Context, suite string, pr probe) (out sdk.ConformanceProbe) {
	spec := pr.spec
	out = sdk.ConformanceProbe{Id: pr.id, Spec: &spec}
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	run := &probeRun{}
	start := time.Now()
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("probe panicked: %v", v)
			}
		}()
		return pr.run(pctx, r, run)
	}()
	ms := int(time.Since(start).Milliseconds())
	out.LatencyMs = &ms
	if run.status >= 100 && run.status <= 599 {
		st := run.status
		out.HttpStatus = &st
	}
	var skip errSkip
	switch {
	case err == nil:
		out.Status = Pass
	case errors.As(err, &skip):
		out.Status = Skip
		msg := clip(skip.reason)
		out.Error = &msg
	default:
		out.Status = Fail
		msg := clip(err.Error())
		out.Error = &msg
	}
	if r.o.Progress != nil {
		r.o.Progress(suite, out)
	}
	return out
}

func clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= 500 {
		return s
	}
	cut := 497
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// runner carries what probes share: the target, what discovery read, and
// the governed suite's state.
type runner struct {
	o    Options
	base string

	specDigest, schemaDigest, buildID string
	project                           string
	throwaway                         throwaway
	leftBehind                        []string
	operations                        map[string]bool
	refManifest                       map[string]any
}

// left records something a probe leaves in the throwaway project, which
// its deletion removes; if the deletion fails, the run names it.
func (r *runner) left(format string, args ...any) {
	r.leftBehind = append(r.leftBehind, fmt.Sprintf(format, args...))
}

// governed runs the governed suite in a throwaway project and removes
// the project afterwards, also when a probe panicked or the run was
// interrupted.
func (r *runner) governed(ctx context.Context) sdk.ConformanceSuite {
	defer r.removeThrowaway(ctx)
	return r.suite(ctx, SuiteGoverned, true, governedProbes)
}

func (r *runner) target() sdk.ConformanceTarget {
	zero := strings.Repeat("0", 64)
	t := sdk.ConformanceTarget{BaseUrl: r.base, BuildId: r.buildID, SpecDigest: r.specDigest, SchemaDigest: r.schemaDigest}
	if t.BuildId == "" {
		t.BuildId = "unknown"
	}
	// A target that serves no contract still gets a report, one whose
	// discovery suite says why; the all-zero digest marks "not served".
	if t.SpecDigest == "" {
		t.SpecDigest = zero
	}
	if t.SchemaDigest == "" {
		t.SchemaDigest = zero
	}
	if len(t.BaseUrl) > 300 {
		t.BaseUrl = t.BaseUrl[:300]
	}
	return t
}

// response is an HTTP answer, read whole (bounded).
type response struct {
	status int
	header http.Header
	body   []byte
}

func (x *response) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(x.body, &m)
	return m
}

const maxBody = 8 << 20

// do sends one request and records its status on the probe. A 429 is
// retried after its Retry-After (at most 5 s, three times), as SPEC.md §7
// rule 2 asks of clients, except for the probe that looks for the 429.
func (r *runner) do(ctx context.Context, p *probeRun, method, path string, header http.Header, body []byte) (*response, error) {
	for attempt := 0; ; attempt++ {
		x, err := r.once(ctx, p, method, path, header, body)
		if err != nil || x.status != http.StatusTooManyRequests || (p != nil && p.want429) || attempt == 3 {
			return x, err
		}
		wait := 1
		if n, err := strconv.Atoi(x.header.Get("Retry-After")); err == nil && n > 0 {
			wait = min(n, 5)
		}
		select {
		case <-ctx.Done():
			return x, nil
		case <-time.After(time.Duration(wait) * time.Second):
		}
	}
}

func (r *runner) once(ctx context.Context, p *probeRun, method, path string, header http.Header, body []byte) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := r.o.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if p != nil {
		p.status = resp.StatusCode
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// authed returns headers carrying the governed key, plus an
// Idempotency-Key when key is not empty.
func (r *runner) authed(idempotencyKey string) http.Header {
	h := http.Header{"Authorization": {"Bearer " + r.o.APIKey}}
	if idempotencyKey != "" {
		h.Set("Idempotency-Key", idempotencyKey)
	}
	return h
}

func newKey(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// runnerInfo is the runner block: hosted-actions with the run's
// coordinates under GitHub Actions, local otherwise.
func runnerInfo(getenv func(string) string) sdk.ConformanceRunner {
	if getenv("GITHUB_ACTIONS") == "true" {
		attempt, err := strconv.Atoi(getenv("GITHUB_RUN_ATTEMPT"))
		if err != nil || attempt < 1 {
			attempt = 1
		}
		server := or(getenv("GITHUB_SERVER_URL"), "https://github.com")
		repo := or(getenv("GITHUB_REPOSITORY"), "unknown")
		return sdk.ConformanceRunner{
			Kind:        "hosted-actions",
			Repository:  limit(repo, 200),
			Workflow:    "public-conformance.yml",
			WorkflowRef: limit(or(getenv("GITHUB_WORKFLOW_REF"), "unknown"), 300),
			RunUrl:      limit(server+"/"+repo+"/actions/runs/"+or(getenv("GITHUB_RUN_ID"), "0"), 500),
			CommitSha:   limit(or(getenv("GITHUB_SHA"), "unknown"), 64),
			RunAttempt:  attempt,
		}
	}
	host, _ := os.Hostname()
	return sdk.ConformanceRunner{
		Kind:        "local",
		Repository:  "local",
		Workflow:    "public-conformance.yml",
		WorkflowRef: "local",
		RunUrl:      limit("local://"+or(host, "localhost"), 500),
		CommitSha:   limit(buildRevision(), 64),
		RunAttempt:  1,
	}
}

func runID(getenv func(string) string, started time.Time) string {
	if getenv("GITHUB_ACTIONS") == "true" && getenv("GITHUB_RUN_ID") != "" {
		return limit("gha:"+getenv("GITHUB_RUN_ID")+":"+or(getenv("GITHUB_RUN_ATTEMPT"), "1")+":"+started.Format("20060102T150405Z"), 160)
	}
	return "local:" + started.Format("20060102T150405.000Z") + ":" + newKey("run")[4:12]
}

// buildRevision is the VCS revision this binary was built from.
func buildRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func limit(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
