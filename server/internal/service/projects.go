package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pierhq/pier/internal/lib/version"
	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/cache"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
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

// LeaveManifestPath names the package's manifest; its SHA-256 is the
// package's manifestSha256.
const LeaveManifestPath = "manifest.json"

// leaveManifest lists every other file of the package with its hash.
type leaveManifest struct {
	Format    string         `json:"format"`
	ProjectID string         `json:"projectId"`
	CreatedAt string         `json:"createdAt"`
	Files     []manifestFile `json:"files"`
	Domains   []string       `json:"domains"`
	// DomainExpiry is when each domain's registration runs out, for the
	// registrar it moves to.
	DomainExpiry map[string]string `json:"domainExpiry,omitempty"`
}

// manifestFile is a file of the leave package as its manifest lists it.
type manifestFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
}

// HoldDuration is how long an ALLOW quote reserves budget (SPEC §3).
const HoldDuration = 15 * time.Minute

// DefaultPolicy lets every TLD through, sets no price ceilings, and sends
// every domain purchase to a human unless the key holds buy_domain.
func DefaultPolicy() ProjectPolicy {
	return ProjectPolicy{
		TLDAllowlist:  []string{},
		TLDDenylist:   []string{},
		ApprovalRules: ApprovalRules{DomainPurchases: HumanGate},
	}
}

func decodePolicy(s string) (ProjectPolicy, error) {
	if p, ok := policies.Get(s); ok {
		return p.clone(), nil
	}
	var p ProjectPolicy
	err := json.Unmarshal([]byte(s), &p)
	if p.TLDAllowlist == nil {
		p.TLDAllowlist = []string{}
	}
	if p.TLDDenylist == nil {
		p.TLDDenylist = []string{}
	}
	if err == nil {
		policies.Put(s, p.clone())
	}
	return p, err
}

// policies are policies decoded before, by their stored text: every
// quote decodes its project's, and a project's policy seldom changes
// (decoding it was a twentieth of a quote's CPU). Entries are copies in
// and out (clone), so that no caller changes another's.
var policies = cache.New[string, ProjectPolicy](1024, 4<<20, func(text string, _ ProjectPolicy) int64 {
	return int64(len(text)) + 256
})

// clone is p with nothing shared: its lists and amounts copied.
func (p ProjectPolicy) clone() ProjectPolicy {
	p.TLDAllowlist, p.TLDDenylist = slices.Clone(p.TLDAllowlist), slices.Clone(p.TLDDenylist)
	p.MaxFirstYearPrice, p.MaxRenewalPrice = clonePtr(p.MaxFirstYearPrice), clonePtr(p.MaxRenewalPrice)
	p.ApprovalRules.ApprovalAbove = clonePtr(p.ApprovalRules.ApprovalAbove)
	return p
}

func clonePtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

// NewProject describes a project a human creates.
type NewProject struct {
	OrgID      string
	Name       string
	LimitMicro money.MicroUSD
	Policy     ProjectPolicy
	CreatedBy  string // ledger actor, such as "human:usr_…"
}

func projectNotFound(id string) *apierr.Error { return notInOrg("project", id, "list_projects") }

// notInOrg is the 404 for an id the caller's organisation has no object
// of that kind for (another organisation's included), with the list tool
// that shows what it has.
func notInOrg(kind, id, list string) *apierr.Error {
	return apierr.Newf("not_found:resource", "no %s %s in your organisation", kind, id).
		WithActions(actions.Tool(list, "agent", nil))
}

// remaining is limit − spent − held for a locked project.
func remaining(p store.Project) money.MicroUSD { return p.LimitMicro - p.SpentMicro - p.HeldMicro }

// checkServiceQuota refuses a launch that would pass the organisation's
// live-service quota.
func (s *projectBooks) checkServiceQuota(ctx context.Context, orgID string) error {
	u, err := s.store.Accounts().Usage(ctx, orgID)
	if err != nil {
		return apierr.Internal(err)
	}
	if q := s.quotas(); u.Services >= q.Services {
		return apierr.Newf("quota:services", "your organisation has %d live services, its quota; tear one down before launching another", u.Services).
			WithActions(actions.Tool("teardown_service", "agent", nil), actions.Manual("contact_operator", "human"))
	}
	return nil
}

// checkBundleQuota refuses an upload that would pass the organisation's
// bundle or storage quota.
func (s *projectBooks) checkBundleQuota(ctx context.Context, orgID string, addBytes int64) error {
	u, err := s.store.Accounts().Usage(ctx, orgID)
	if err != nil {
		return apierr.Internal(err)
	}
	q := s.quotas()
	if u.Bundles >= q.Bundles {
		return apierr.Newf("quota:bundles", "your organisation stores %d bundles, its quota; ask the operator to raise it", u.Bundles).
			WithActions(actions.Manual("contact_operator", "human"))
	}
	if u.BundleBytes+addBytes > q.StorageBytes {
		return apierr.Newf("quota:storage", "this bundle would bring your organisation's bundles to %d bytes; the quota is %d", u.BundleBytes+addBytes, q.StorageBytes).
			WithActions(actions.Manual("contact_operator", "human")).
			WithField("body.files", fmt.Sprintf("%d bytes over the storage quota", u.BundleBytes+addBytes-q.StorageBytes))
	}
	return nil
}

// CreateProject creates a project with a budget and policy.
func (s *Projects) Create(ctx context.Context, np NewProject) (store.Project, error) {
	pol, err := json.Marshal(np.Policy)
	if err != nil {
		return store.Project{}, err
	}
	p := store.Project{ID: auth.ID("prj"), OrgID: np.OrgID, Name: np.Name, LimitMicro: np.LimitMicro, Policy: string(pol), CreatedAt: s.Now().UTC()}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.Projects().Create(ctx, p); err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: np.OrgID, Actor: np.CreatedBy, Action: "create_project", ObjectType: "project", ObjectID: p.ID,
			Details: map[string]any{"name": np.Name, "budgetLimitMicroUsd": np.LimitMicro, "policy": json.RawMessage(pol)}}, s.Now())
		return err
	})
	return p, err
}

// bookMeter reads a project's budget period for its view.
type bookMeter interface {
	periodView(ctx context.Context, p store.Project, pol ProjectPolicy, held money.MicroUSD) (PeriodView, error)
}

// expireHolds releases a locked project's holds whose time ran out, with a
// ledger entry each, so that every read and write sees current books.
// Until the project's HoldsExpireAt no hold can have run out, and the
// project's row, read to lock it, says so: most writes look for none.
func (s *projectBooks) expireHolds(ctx context.Context, tx *store.Tx, p *store.Project, now time.Time) error {
	if now.Before(p.HoldsExpireAt) {
		return nil
	}
	expired, err := tx.Quotes().ExpiredHolds(ctx, p.ID, now)
	if err != nil {
		return err
	}
	for _, q := range expired {
		if err := settleHold(ctx, tx, p, q, "expired", "hold_expired", now, nil); err != nil {
			return err
		}
	}
	p.HoldsExpireAt, err = tx.Projects().RecountHoldsExpire(ctx, p.ID)
	return err
}

// settleHold ends quote q's hold in state, gives its money back to the
// project and records action in the ledger, with extra details beside the
// project and the amount.
func settleHold(ctx context.Context, tx *store.Tx, p *store.Project, q store.Quote, state, action string, now time.Time, extra map[string]any) error {
	if err := tx.Quotes().Settle(ctx, q.ID, state, now); err != nil {
		return err
	}
	if err := tx.Projects().MoveMoney(ctx, p.ID, -q.AmountMicro, 0); err != nil {
		return err
	}
	p.HeldMicro -= q.AmountMicro
	details := map[string]any{"projectId": p.ID, "amountMicroUsd": q.AmountMicro}
	maps.Copy(details, extra)
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: "system", Action: action, ObjectType: "quote", ObjectID: q.ID, Details: details}, now)
	return err
}

// Hold is budget a quote reserves until it expires.
type Hold struct {
	QuoteID   string
	Amount    money.MicroUSD
	ExpiresAt time.Time
}

// Project is a project as it reads: its budget's books with the holds on
// it, its policy and its budget's current period.
type Project struct {
	ID, Name string
	// ParentID is the project a child's budget was carved from; "" for
	// the organisation's own projects.
	ParentID                      string
	Limit, Spent, Held, Remaining money.MicroUSD
	Holds                         []Hold
	Policy                        ProjectPolicy
	Period                        PeriodView
	// KeyCaps are the organisation's capped keys with what each committed
	// in its period, by key id: on a single project's read only (nil
	// elsewhere, empty when no key is capped).
	KeyCaps   []KeySpend
	CreatedAt time.Time
}

// projectView renders a project with its active holds.
func (s *projectBooks) projectView(ctx context.Context, p store.Project) (Project, error) {
	now := s.Now()
	holds, err := s.store.Quotes().ActiveHolds(ctx, p.ID, now)
	if err != nil {
		return Project{}, err
	}
	// Holds past their time count as released even before a write expires them.
	view := Project{ID: p.ID, Name: p.Name, ParentID: p.ParentID, Limit: p.LimitMicro, Spent: p.SpentMicro, Holds: []Hold{}, CreatedAt: p.CreatedAt}
	for _, h := range holds {
		view.Held += h.AmountMicro
		view.Holds = append(view.Holds, Hold{QuoteID: h.ID, Amount: h.AmountMicro, ExpiresAt: h.ExpiresAt})
	}
	view.Remaining = p.LimitMicro - p.SpentMicro - view.Held
	if view.Policy, err = decodePolicy(p.Policy); err != nil {
		return view, err
	}
	if view.Period, err = s.meter.periodView(ctx, p, view.Policy, view.Held); err != nil {
		return view, err
	}
	return view, nil
}

// Get reads a project of the caller's organisation, with its
// organisation's key caps.
func (s *Projects) Get(ctx context.Context, orgID, id string) (*Project, error) {
	p, err := s.store.Projects().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && p.DeletedAt != nil {
		return nil, projectNotFound(id)
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	v, err := s.projectView(ctx, p)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	if v.KeyCaps, err = keyCapViews(ctx, s.store, orgID, s.Now()); err != nil {
		return nil, apierr.Internal(err)
	}
	return &v, nil
}

// List lists the caller's organisation's projects.
func (s *projectBooks) List(ctx context.Context, orgID string, f store.Filter) (*Page[Project], error) {
	ps, err := s.store.Projects().Page(ctx, orgID, f)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out := &Page[Project]{Items: []Project{}, Args: f.Args()}
	for _, p := range ps {
		v, err := s.projectView(ctx, p)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		out.Items = append(out.Items, v)
	}
	if len(ps) > 0 {
		last := ps[len(ps)-1]
		out.NextCursor = nextCursor(f, len(ps), last.CreatedAt, last.ID)
	}
	return out, nil
}

// LedgerPage is a page of the organisation's chain, oldest first, and the
// hash of its newest entry (the genesis hash before any).
type LedgerPage struct {
	Entries  []ledger.Entry
	HeadHash string
}

// LedgerEntries reads the organisation's chain after seq after, limit
// entries at most.
func (s *Projects) LedgerEntries(ctx context.Context, orgID string, after int64, limit int) (*LedgerPage, error) {
	entries, err := s.store.Ledger().Entries(ctx, orgID, after, limit)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	page := &LedgerPage{Entries: entries, HeadHash: ledger.Genesis}
	if len(entries) > 0 {
		page.HeadHash = entries[len(entries)-1].Hash
	}
	return page, nil
}

// PackageFile is one file of the leave package, with its content.
type PackageFile struct {
	Path, SHA256 string
	Size         int
	Content      []byte
}

// LeavePackage is a project's leave package: its files, the manifest
// first, and the manifest's hash. TransferURL is where a human takes the
// organisation's domains to another registrar ("" when it owns none).
type LeavePackage struct {
	ProjectID      string
	ManifestSHA256 string
	Files          []PackageFile
	TransferURL    string
	Mutated        Mutated
}

// ExportProject builds the leave package: each service's site files, the
// zone of every domain the organisation owns as an RFC 1035 master file, the
// organisation's audit ledger, and a manifest of SHA-256 hashes. Auth codes
// for transfer-out are not in it: only a signed-in human sees those.
func (s *Projects) Export(ctx context.Context, p *auth.Principal, projectID string) (*LeavePackage, error) {
	proj, err := s.store.Projects().Get(ctx, p.OrgID, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, projectNotFound(projectID)
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	services, err := s.store.Services().InProject(ctx, p.OrgID, projectID)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	contents := map[string][]byte{}
	if err := s.exportSites(ctx, p.OrgID, services, contents); err != nil {
		return nil, err
	}
	if err := s.exportDatabases(ctx, services, contents); err != nil {
		return nil, err
	}
	domains, err := s.exportDomains(ctx, p.OrgID, contents)
	if err != nil {
		return nil, err
	}
	entries, err := s.store.Ledger().Entries(ctx, p.OrgID, 0, 1<<30)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	var lb bytes.Buffer
	if err := ledger.WriteJSONL(&lb, entries); err != nil {
		return nil, apierr.Internal(err)
	}
	contents["ledger.jsonl"] = lb.Bytes()

	expiry, err := s.domainExpiry(ctx, p.OrgID)
	if err != nil {
		return nil, err
	}
	files, msum := s.packageFiles(projectID, domains, expiry, contents)
	m := s.mutated("export_project", nil, []Resource{{Type: "leave_package", ID: hex.EncodeToString(msum[:8])}}, nil, remaining(proj))
	out := &LeavePackage{ProjectID: projectID, ManifestSHA256: hex.EncodeToString(msum[:]), Files: files, Mutated: m}
	if len(domains) > 0 {
		out.TransferURL = s.baseURL() + "/domains"
	}
	return out, nil
}

// exportSites puts each live service's site files in the leave package.
func (s *Projects) exportSites(ctx context.Context, orgID string, services []store.Service, contents map[string][]byte) error {
	for _, svc := range services {
		if ServiceState(svc.State) != ServiceLive || svc.BundleID == "" {
			continue
		}
		b, err := s.store.Bundles().Get(ctx, orgID, svc.BundleID)
		if err != nil {
			return apierr.Internal(err)
		}
		var files []site.File
		if err := json.Unmarshal([]byte(b.Manifest), &files); err != nil {
			return apierr.Internal(err)
		}
		for _, f := range files {
			data, err := s.store.Bundles().Blob(ctx, f.SHA256)
			if err != nil {
				return apierr.Internal(err)
			}
			contents["sites/"+svc.Name+"/"+f.Path] = data
		}
	}
	return nil
}

// exportDatabases puts each managed database in as a plain-SQL dump: taken
// now for a running service, the one taken before teardown dropped it
// otherwise.
func (s *Projects) exportDatabases(ctx context.Context, services []store.Service, contents map[string][]byte) error {
	for _, svc := range services {
		d, err := s.store.Services().Database(ctx, svc.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return apierr.Internal(err)
		}
		var dump []byte
		switch {
		case d.DumpSHA != "":
			if dump, err = s.store.Bundles().Blob(ctx, d.DumpSHA); err != nil {
				return apierr.Internal(err)
			}
		case DatabaseState(d.State) == DatabaseReady && s.databases != nil:
			if dump, err = s.databases.Dump(ctx, d.Name); err != nil {
				return apierr.New("internal:unavailable", "could not dump the database of "+svc.Name+": "+err.Error())
			}
		default:
			continue
		}
		contents["databases/"+svc.Name+"-"+svc.ID+".sql"] = dump
	}
	return nil
}

// exportDomains puts in every domain the organisation owns, with its zone,
// whatever happened to the services that used it: the zone Pier serves,
// or, for a domain Pier serves no zone for any more, the zone it would
// serve. Either keeps the mail records of the domain's email setup. The
// registrant the person confirmed goes in too, as the registrar records
// it: a new registrar needs it to take the domain over.
func (s *Projects) exportDomains(ctx context.Context, orgID string, contents map[string][]byte) ([]string, error) {
	purchases, err := s.store.Domains().OrgPurchases(ctx, orgID)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	var domains []string
	for _, pu := range purchases {
		serial := s.Now().Unix()
		recs, err := s.zoneRecords(ctx, orgID, pu.Domain, true)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		z, err := s.store.Domains().Zone(ctx, pu.Domain)
		switch {
		case err == nil:
			if recs, err = zone.DecodeRecords(z.Records); err != nil {
				return nil, apierr.Internal(err)
			}
			serial = z.Serial
		case !errors.Is(err, store.ErrNotFound):
			return nil, apierr.Internal(err)
		}
		master, err := zone.MasterFile(pu.Domain, serial, recs)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		contents["zones/"+pu.Domain+".zone"] = []byte(master)
		domains = append(domains, pu.Domain)
		if r, err := s.store.Mail().CurrentRegistrant(ctx, orgID, pu.Domain); err == nil {
			rec := map[string]any{"domain": pu.Domain, "confirmedAt": r.ConfirmedAt, "registrant": json.RawMessage(r.Contact)}
			b, _ := json.MarshalIndent(rec, "", "  ")
			contents["registrants/"+pu.Domain+".json"] = append(b, '\n')
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, apierr.Internal(err)
		}
	}
	return domains, nil
}

// domainExpiry is when each domain the organisation owns runs out, for
// the leave package's manifest: a new registrar needs to know.
func (s *Projects) domainExpiry(ctx context.Context, orgID string) (map[string]string, error) {
	purchases, err := s.store.Domains().OrgPurchases(ctx, orgID)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	var expiry map[string]string
	for _, pu := range purchases {
		expires, err := currentExpiry(ctx, s.store, pu)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		if expiry == nil {
			expiry = map[string]string{}
		}
		expiry[pu.Domain] = expires.Format(time.RFC3339)
	}
	return expiry, nil
}

// packageFiles lists the leave package's files, the manifest of SHA-256
// hashes first, and returns the manifest's hash.
func (s *Projects) packageFiles(projectID string, domains []string, expiry map[string]string, contents map[string][]byte) ([]PackageFile, [32]byte) {
	paths := make([]string, 0, len(contents))
	for p := range contents {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	man := leaveManifest{Format: "pier.leave.v1", ProjectID: projectID, CreatedAt: s.Now().UTC().Format("2006-01-02T15:04:05Z"), Domains: domains, DomainExpiry: expiry}
	if man.Domains == nil {
		man.Domains = []string{}
	}
	var files []PackageFile
	for _, path := range paths {
		sum := sha256.Sum256(contents[path])
		entry := manifestFile{Path: path, SHA256: hex.EncodeToString(sum[:]), Size: len(contents[path])}
		man.Files = append(man.Files, entry)
		files = append(files, PackageFile{Path: entry.Path, SHA256: entry.SHA256, Size: entry.Size, Content: contents[path]})
	}
	mj, _ := json.MarshalIndent(man, "", "  ")
	msum := sha256.Sum256(mj)
	return append([]PackageFile{{Path: LeaveManifestPath, SHA256: hex.EncodeToString(msum[:]), Size: len(mj), Content: mj}}, files...), msum
}

// KeyKind is what kind of credential a caller holds.
type KeyKind string

const (
	APIKey     KeyKind = "api_key"
	OAuthGrant KeyKind = "oauth_grant"
)

// ProjectBudget is a project's name and budget, as whoami lists them.
type ProjectBudget struct {
	ID, Name         string
	Limit, Remaining money.MicroUSD
}

// Whoami is who the caller is: its key (or OAuth grant) and the key's
// cap, its organisation, projects, scopes and quotas, and which server
// answered.
type Whoami struct {
	KeyID   string
	KeyKind KeyKind
	KeyName string
	// SpendCap is the key's cap and spend; nil when it has none.
	SpendCap       *KeySpend
	OrgID, OrgName string
	Projects       []ProjectBudget
	// Project is the project commands use without one named: set when
	// the organisation has exactly one.
	Project          string
	Scopes           []string
	Quotas           Quotas
	BaseURL, Version string
}

// Whoami says who the caller is.
func (s *Projects) Whoami(ctx context.Context, p *auth.Principal) (*Whoami, error) {
	out := &Whoami{Scopes: append([]string{}, p.Scopes...), Projects: []ProjectBudget{}, KeyID: p.KeyID, KeyKind: APIKey}
	if p.KeyID == "" {
		out.KeyID, out.KeyKind, out.KeyName = p.GrantID, OAuthGrant, "OAuth grant"
	} else if err := s.whoamiKey(ctx, p, out); err != nil {
		return nil, apierr.Internal(err)
	}
	org, err := s.store.Accounts().Organization(ctx, p.OrgID)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out.OrgID, out.OrgName = org.ID, org.Name
	ps, err := s.store.Projects().List(ctx, p.OrgID)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	for _, pr := range ps {
		v, err := s.projectView(ctx, pr)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		out.Projects = append(out.Projects, ProjectBudget{ID: v.ID, Name: v.Name, Limit: v.Limit, Remaining: v.Remaining})
	}
	if len(ps) == 1 {
		out.Project = ps[0].ID
	}
	out.Quotas, out.BaseURL, out.Version = s.quotas(), s.baseURL(), version.Version
	return out, nil
}

// whoamiKey fills in the caller's key: its name, and its cap when it has
// one.
func (s *Projects) whoamiKey(ctx context.Context, p *auth.Principal, out *Whoami) error {
	keys, err := s.store.Keys().List(ctx, p.OrgID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.ID == p.KeyID {
			out.KeyName = k.Name
		}
	}
	ks, err := keySpendNow(ctx, s.store.Keys(), p, s.Now())
	if err != nil {
		return err
	}
	if ks.Key.CapMicro != nil {
		out.SpendCap = &ks
	}
	return nil
}

// policyReasons lists what the project's policy refuses about the items.
func policyReasons(pol ProjectPolicy, items []pricedItem) []apierr.Code {
	var out []apierr.Code
	add := func(r apierr.Code) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, it := range items {
		if it.Kind != ItemDomain {
			continue
		}
		_, tld, _ := strings.Cut(it.Domain, ".")
		if (len(pol.TLDAllowlist) > 0 && !slices.Contains(pol.TLDAllowlist, tld)) || slices.Contains(pol.TLDDenylist, tld) {
			add("policy:tld_denied")
		}
		if pol.MaxFirstYearPrice != nil && it.FirstYearMicro > *pol.MaxFirstYearPrice {
			add("policy:price_ceiling")
		}
		if pol.MaxRenewalPrice != nil && (it.AnnualRenewalMicro == 0 || it.AnnualRenewalMicro > *pol.MaxRenewalPrice) {
			add("policy:price_ceiling")
		}
	}
	return out
}

func needsApproval(pol ProjectPolicy, amount money.MicroUSD) bool {
	return pol.ApprovalRules.ApprovalAbove != nil && amount > *pol.ApprovalRules.ApprovalAbove
}

// policyVerdict is what a project's policy says of priced items: the
// codes it refuses them for, and whether a human must approve their total.
type policyVerdict struct {
	refused  []apierr.Code
	approval bool
}

// judge holds priced items to a project's policy.
func judge(pol ProjectPolicy, items []pricedItem) policyVerdict {
	return policyVerdict{refused: policyReasons(pol, items), approval: needsApproval(pol, total(items))}
}

// egressDenied says a project's policy keeps its services off the
// network (serviceEgress: denied).
func egressDenied(policy string) bool {
	pol, err := decodePolicy(policy)
	return err == nil && pol.Egress == EgressDenied
}

// keyCapViews are the organisation's capped keys with their spend, by
// key id, as get_project shows them.
func keyCapViews(ctx context.Context, st keysStore, orgID string, now time.Time) ([]KeySpend, error) {
	spends, err := keySpends(ctx, st, orgID, now)
	if err != nil {
		return nil, err
	}
	out := make([]KeySpend, 0, len(spends))
	for _, ks := range spends {
		out = append(out, ks)
	}
	slices.SortFunc(out, func(a, b KeySpend) int { return strings.Compare(a.Key.ID, b.Key.ID) })
	return out, nil
}
