package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// A registrant is a person, so a person confirms one: a signed-in human of
// the organisation at the gate's approval URL, or the person at the
// proposed address from a mailed link, and the link only when no agent key
// can read mail to that address. Otherwise an agent could propose its own
// inbox, read the link and press the button itself.

// RegistrantContact is the person a domain is registered to, kept as the
// contract writes it (the optional parts empty when not given).
type RegistrantContact struct {
	Name         string `json:"name"`
	Email        string `json:"email"`
	Country      string `json:"country"`
	Organization string `json:"organization,omitempty"`
	Street       string `json:"street,omitempty"`
	City         string `json:"city,omitempty"`
	State        string `json:"state,omitempty"`
	PostalCode   string `json:"postalCode,omitempty"`
}

// registrantPayload is what a registrant contact task carries.
type registrantPayload struct {
	Domain  string            `json:"domain"`
	Contact RegistrantContact `json:"contact"`
}

// registrantGatePayload is what a registrant gate carries, for the approval
// page: the proposal, and why no link was mailed when none was.
type registrantGatePayload struct {
	Domain      string            `json:"domain"`
	Contact     RegistrantContact `json:"contact"`
	RequestedBy string            `json:"requestedBy"`
	LinkMailed  bool              `json:"linkMailed"`
	NoLinkWhy   string            `json:"noLinkWhy,omitempty"`
}

// RegistrantTTL bounds how long a confirmation link works.
const RegistrantTTL = 7 * 24 * time.Hour

// localPartRE is an unquoted local part (RFC 5322 dot-atom): quoted
// strings, comments and address literals are refused, so the address
// compared is the address mail goes to.
var localPartRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$")

// registrantEmail checks a proposed registrant's address and answers it
// as mail is routed: the domain in lower-case A-labels (IDNA) without a
// trailing dot.
func registrantEmail(raw string) (addr, domain string, err error) {
	local, host, ok := strings.Cut(raw, "@")
	switch {
	case !ok || strings.Contains(host, "@"):
		return "", "", errors.New("it is not a bare address such as ada@example.org")
	case len(local) > 64 || !localPartRE.MatchString(local):
		return "", "", errors.New("its local part is not a plain one (no quotes, spaces or comments)")
	case strings.HasPrefix(host, "["):
		return "", "", errors.New("an address literal names no domain")
	}
	ascii, ierr := idna.Lookup.ToASCII(strings.TrimSuffix(host, "."))
	if ierr != nil {
		return "", "", fmt.Errorf("its domain is not a valid name (%v)", ierr)
	}
	labels := strings.Split(ascii, ".")
	if len(ascii) > 253 || len(labels) < 2 || strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", "", errors.New("its domain is not a public domain name")
	}
	for _, l := range labels {
		if !labelRE().MatchString(l) {
			return "", "", errors.New("its domain is not a valid name")
		}
	}
	return local + "@" + ascii, ascii, nil
}

// agentReadable says why mail to an address on domain could reach an agent
// key, or "" when nothing shows it could. Pier reads mail for a domain it
// hosts mail for, whether or not the address (or a catch-all) exists yet;
// the agents of the organisation holding a domain Pier's registrar sold
// write its DNS, so they can point its mail anywhere; and Pier's own host
// names and preview hosts are Pier's. Each holds for the domain's
// subdomains too.
func (s *Mail) agentReadable(ctx context.Context, domain string) (string, error) {
	for _, own := range []string{strings.TrimPrefix(hostOnly(s.baseURL()), "www."), s.previewDomain} {
		own = strings.ToLower(strings.TrimSuffix(own, "."))
		if own != "" && (domain == own || strings.HasSuffix(domain, "."+own)) {
			return domain + " is one of Pier's own host names", nil
		}
	}
	for name := domain; strings.Contains(name, "."); {
		if _, err := s.store.Mail().Domain(ctx, name); err == nil {
			return "Pier hosts mail for " + name, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		if org, _, err := s.store.Domains().Holder(ctx, name); err == nil && org != "" {
			return name + " is registered through Pier, and its DNS is written with agent keys", nil
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		if _, err := s.store.Domains().Zone(ctx, name); err == nil {
			return "Pier serves the DNS of " + name, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		_, name, _ = strings.Cut(name, ".")
	}
	return "", nil
}

// SetRegistrant proposes a registrant for an owned domain. The task waits
// on a gate that a signed-in person of the organisation decides; when no
// agent key can read mail to the proposed address, a link also goes there,
// for the person to confirm from it.
func (s *Mail) SetRegistrant(ctx context.Context, p *auth.Principal, domain string, c RegistrantContact) (*Task, bool, error) {
	domain = strings.ToLower(domain)
	email, emailDomain, err := registrantEmail(c.Email)
	if err != nil {
		return nil, false, apierr.Newf("input:invalid", "email %q: %v", c.Email, err).
			WithField("body.email", err.Error())
	}
	state, err := s.domains.State(ctx, p, domain)
	if err != nil {
		return nil, false, err
	}
	if state != DomainOwned {
		return nil, false, apierr.Newf("conflict:state", "%s is not a domain your organisation owns", domain).
			WithActions(actions.Tool("list_domains", "agent", nil))
	}
	c.Email = email
	noLinkWhy, err := s.agentReadable(ctx, emailDomain)
	if err != nil {
		return nil, false, err
	}
	secret := make([]byte, 24)
	rand.Read(secret)
	token := hex.EncodeToString(secret)
	from := "registrar@" + strings.TrimPrefix(hostOnly(s.baseURL()), "www.")
	var msg []byte
	if noLinkWhy == "" {
		link := s.baseURL() + "/registrant/confirm/" + token
		body := fmt.Sprintf("Someone proposed you as the registrant of %s:\n\n  %s\n  %s\n\nIf this is you and the details are right, confirm here:\n\n  %s\n\nIf not, ignore this message; nothing changes.\n",
			domain, c.Name, email, link)
		if msg, err = s.systemMessage(ctx, from, email, "Confirm you are the registrant of "+domain, body); err != nil {
			return nil, false, err
		}
	}
	rp := newRegistrantProposal(p, domain, email, noLinkWhy, c, token, s.Now().UTC())
	task := rp.task
	err = s.store.InTx(ctx, func(tx *store.Tx) error { return rp.record(ctx, tx, p) })
	if err != nil {
		return nil, false, err
	}
	// The link goes out only once the proposal it names is stored, so it
	// works as soon as it arrives. A link that could not be sent ends the
	// task; its token was never shown to anyone.
	if msg != nil {
		if err := s.deliverAnywhere(ctx, from, email, msg); err != nil {
			if ferr := s.failUnsentRegistrant(ctx, task, domain, email, err); ferr != nil {
				return nil, false, errors.Join(err, ferr)
			}
			return nil, false, err
		}
	}
	view, err := s.tasks.Get(ctx, p.OrgID, task.ID)
	if err != nil {
		return nil, false, err
	}
	return view, msg != nil, nil
}

// registrantProposal is a proposed registrant as stored: its task, which
// waits on a gate, and the hash of the token its link carries.
type registrantProposal struct {
	domain, email, noLinkWhy string
	contact                  RegistrantContact
	tokenHash                string
	task                     store.Task
	now                      time.Time
}

func newRegistrantProposal(p *auth.Principal, domain, email, noLinkWhy string, c RegistrantContact, token string, now time.Time) registrantProposal {
	sum := sha256.Sum256([]byte(token))
	task := store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, Kind: "registrant_contact", State: "input_required", GateID: auth.ID("gat"), CreatedAt: now, UpdatedAt: now}
	detail := "a signed-in person of the organisation confirms at the approval URL, or the person confirms from the link that went to " + email
	if noLinkWhy != "" {
		detail = "no link was mailed, since agent keys could read mail to " + email + " (" + noLinkWhy + "): a signed-in person of the organisation confirms at the approval URL"
	}
	steps := []TaskStep{{Name: "confirm_registrant", State: "input_required", StartedAt: &now, Detail: detail}, {Name: "record_registrant", State: "pending"}}
	sj, _ := json.Marshal(steps)
	pj, _ := json.Marshal(registrantPayload{Domain: domain, Contact: c})
	task.Steps, task.Payload = string(sj), string(pj)
	return registrantProposal{domain: domain, email: email, noLinkWhy: noLinkWhy, contact: c, tokenHash: hex.EncodeToString(sum[:]), task: task, now: now}
}

// record stores the proposal with its task and gate, supersedes any
// proposal still waiting, and writes the ledger.
func (rp registrantProposal) record(ctx context.Context, tx *store.Tx, p *auth.Principal) error {
	task, now, domain := rp.task, rp.now, rp.domain
	gj, _ := json.Marshal(registrantGatePayload{Domain: domain, Contact: rp.contact, RequestedBy: actorOf(p), LinkMailed: rp.noLinkWhy == "", NoLinkWhy: rp.noLinkWhy})
	cj, _ := json.Marshal(rp.contact)
	if err := tx.Tasks().Insert(ctx, task); err != nil {
		return err
	}
	if err := tx.Gates().Insert(ctx, store.Gate{ID: task.GateID, OrgID: p.OrgID, TaskID: task.ID, Kind: "registrant_contact", Payload: string(gj), CreatedAt: now}); err != nil {
		return err
	}
	older, err := tx.Mail().ProposeRegistrant(ctx, store.Registrant{Domain: domain, OrgID: p.OrgID, Contact: string(cj), TokenHash: rp.tokenHash, TaskID: task.ID, CreatedAt: now})
	if err != nil {
		return err
	}
	// A newer proposal replaces any still waiting: their links stop
	// working, their gates close and their tasks end.
	for _, o := range older {
		if err := supersedeRegistrantTask(ctx, tx, o, task.ID, now); err != nil {
			return err
		}
	}
	details := map[string]any{"taskId": task.ID, "gateId": task.GateID}
	if rp.noLinkWhy == "" {
		details["emailSentTo"] = rp.email
	} else {
		details["noLinkBecause"] = rp.noLinkWhy
	}
	_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "set_registrant_contact", ObjectType: "domain", ObjectID: domain,
		Details: details}, now)
	return err
}

// failUnsentRegistrant ends a proposal whose link could not be sent: its
// task fails, its gate closes and the proposal is withdrawn.
func (s *Mail) failUnsentRegistrant(ctx context.Context, task store.Task, domain, email string, cause error) error {
	return s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now().UTC()
		t, err := tx.Tasks().Lock(ctx, task.OrgID, task.ID)
		if err != nil {
			return err
		}
		if r, err := tx.Mail().RegistrantByTask(ctx, domain, task.ID); err == nil {
			if err := tx.Mail().DeclineRegistrant(ctx, r.TokenHash); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		if err := tx.Gates().Decide(ctx, task.OrgID, task.GateID, "denied", "system:unsent", now); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		steps := []TaskStep{{Name: "confirm_registrant", State: "failed", CompletedAt: &now, Detail: "the link could not be sent to " + email}, {Name: "record_registrant", State: "skipped"}}
		sj, _ := json.Marshal(steps)
		rj, _ := json.Marshal(map[string]any{"error": cause.Error()})
		t.State, t.Steps, t.Result, t.GateID, t.UpdatedAt = "failed", string(sj), string(rj), "", now
		return tx.Tasks().Update(ctx, t)
	})
}

// supersedeRegistrantTask fails the task of a proposal a newer one
// replaced, and closes its gate.
func supersedeRegistrantTask(ctx context.Context, tx *store.Tx, r store.Registrant, newer string, now time.Time) error {
	t, err := tx.Tasks().Lock(ctx, r.OrgID, r.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	switch TaskState(t.State) {
	case TaskSucceeded, TaskFailed, TaskCanceled:
		return nil
	}
	if t.GateID != "" {
		if err := tx.Gates().Decide(ctx, t.OrgID, t.GateID, "denied", "system:superseded", now); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	msg := "a newer proposal for " + r.Domain + " (task " + newer + ") replaced this one; its confirmation link and approval no longer work"
	var steps []TaskStep
	json.Unmarshal([]byte(t.Steps), &steps)
	for i := range steps {
		if steps[i].State != StepStateSucceeded {
			steps[i].State, steps[i].Detail = "skipped", msg
		}
	}
	if len(steps) > 0 {
		steps[0].State = "failed"
	}
	sj, _ := json.Marshal(steps)
	res, _ := json.Marshal(map[string]any{"error": msg, "blockedBy": "conflict:state", "retryable": false, "domain": r.Domain, "supersededBy": newer})
	t.Steps, t.State, t.Result, t.GateID, t.UpdatedAt = string(sj), "failed", string(res), "", now
	return tx.Tasks().Update(ctx, t)
}

// RegistrantProposal is what the confirmation page shows.
type RegistrantProposal struct {
	Domain  string
	Contact RegistrantContact
	State   string
}

var (
	// ErrRegistrantSuperseded is a confirmation link whose proposal a
	// newer one for the same domain replaced.
	ErrRegistrantSuperseded = errors.New("a newer proposal replaced this one")
	// ErrRegistrantDeclined is a confirmation link whose proposal a person
	// of the organisation declined at its approval URL.
	ErrRegistrantDeclined = errors.New("a person of the organisation declined this proposal")
	// ErrRegistrantNeedsSession is a confirmation link to an address agent
	// keys can read: only a signed-in person of the organisation confirms
	// such a registrant.
	ErrRegistrantNeedsSession = errors.New("agent keys can read mail to this address, so a signed-in person of the organisation confirms it")
)

// RegistrantByToken reads the proposal a confirmation link names.
func (s *Mail) RegistrantByToken(ctx context.Context, token string) (RegistrantProposal, error) {
	sum := sha256.Sum256([]byte(token))
	r, err := s.store.Mail().RegistrantByToken(ctx, hex.EncodeToString(sum[:]))
	if err != nil || s.Now().Sub(r.CreatedAt) > RegistrantTTL {
		return RegistrantProposal{}, store.ErrNotFound
	}
	switch RegistrantState(r.State) {
	case RegistrantSuperseded:
		return RegistrantProposal{}, ErrRegistrantSuperseded
	case RegistrantDeclined:
		return RegistrantProposal{}, ErrRegistrantDeclined
	}
	var c RegistrantContact
	json.Unmarshal([]byte(r.Contact), &c)
	prop := RegistrantProposal{Domain: r.Domain, Contact: c, State: r.State}
	if RegistrantState(r.State) == RegistrantPending {
		// The address is judged again: what agents can read may have
		// changed since the proposal (a domain bought, mail set up).
		_, domain, err := registrantEmail(c.Email)
		if err != nil {
			return RegistrantProposal{}, ErrRegistrantNeedsSession
		}
		why, err := s.agentReadable(ctx, domain)
		if err != nil {
			return RegistrantProposal{}, err
		}
		if why != "" {
			return RegistrantProposal{}, ErrRegistrantNeedsSession
		}
	}
	return prop, nil
}

// ConfirmRegistrant is the confirmation of the person at the proposed
// address, from the mailed link: the registrar records the contact, the
// gate closes and the task ends.
func (s *Mail) ConfirmRegistrant(ctx context.Context, token string) (RegistrantProposal, error) {
	prop, err := s.RegistrantByToken(ctx, token)
	if err != nil {
		return prop, err
	}
	sum := sha256.Sum256([]byte(token))
	hash := hex.EncodeToString(sum[:])
	r, err := s.store.Mail().RegistrantByToken(ctx, hash)
	if err != nil {
		return prop, err
	}
	now := s.Now().UTC()
	actor := "registrant:" + prop.Contact.Email
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.Mail().ConfirmRegistrant(ctx, hash, now); err != nil {
			return err
		}
		t, err := tx.Tasks().Lock(ctx, r.OrgID, r.TaskID)
		if err != nil {
			return err
		}
		if t.GateID != "" {
			if err := tx.Gates().Decide(ctx, r.OrgID, t.GateID, "approved", actor, now); err != nil {
				return err
			}
		}
		if err := s.recordRegistrant(ctx, tx, t, prop, "confirmed by the person at "+prop.Contact.Email+", from the mailed link", now); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: r.OrgID, Actor: actor, Action: "confirm_registrant", ObjectType: "domain", ObjectID: r.Domain,
			Details: map[string]any{"taskId": r.TaskID, "via": "mailed_link"}}, now)
		return err
	})
	if errors.Is(err, store.ErrConflict) {
		// Confirmed already (a second press), or replaced, declined or
		// decided at the approval URL meanwhile.
		again, rerr := s.store.Mail().RegistrantByToken(ctx, hash)
		if rerr != nil {
			return prop, rerr
		}
		switch RegistrantState(again.State) {
		case RegistrantConfirmed:
			prop.State = "confirmed"
			return prop, nil
		case RegistrantDeclined:
			return RegistrantProposal{}, ErrRegistrantDeclined
		}
		return RegistrantProposal{}, ErrRegistrantSuperseded
	}
	prop.State = "confirmed"
	return prop, err
}

// recordRegistrant ends a confirmed proposal's task: the sandbox registrar
// records the contact.
func (s links) recordRegistrant(ctx context.Context, tx *store.Tx, t store.Task, prop RegistrantProposal, how string, now time.Time) error {
	var steps []TaskStep
	json.Unmarshal([]byte(t.Steps), &steps)
	for i := range steps {
		steps[i].State, steps[i].CompletedAt = "succeeded", &now
	}
	if len(steps) > 0 {
		steps[0].Detail = how
		steps[len(steps)-1].Detail = "the sandbox registrar records " + prop.Contact.Name + " as registrant of " + prop.Domain
	}
	sj, _ := json.Marshal(steps)
	res, _ := json.Marshal(map[string]any{"domain": prop.Domain, "rdap": s.baseURL() + "/rdap/domain/" + prop.Domain})
	t.Steps, t.State, t.Result, t.GateID, t.UpdatedAt = string(sj), "succeeded", string(res), "", now
	return tx.Tasks().Update(ctx, t)
}

// decideRegistrant is a signed-in person's decision on a registrant gate:
// approving confirms the proposal under that person's name, denying
// withdraws it.
func (s *Approvals) decideRegistrant(ctx context.Context, tx *store.Tx, h Human, g store.Gate, t store.Task, approve bool, now time.Time) error {
	var pl registrantGatePayload
	if err := json.Unmarshal([]byte(g.Payload), &pl); err != nil {
		return err
	}
	r, err := tx.Mail().RegistrantByTask(ctx, pl.Domain, t.ID)
	if err != nil {
		return err
	}
	closed := apierr.Newf("conflict:state", "this proposal is %s; it can no longer be decided", r.State)
	if RegistrantState(r.State) != RegistrantPending {
		return closed
	}
	actor := signedInActor(h)
	decision := "denied"
	if approve {
		decision = "approved"
		if err := tx.Mail().ConfirmRegistrant(ctx, r.TokenHash, now); errors.Is(err, store.ErrConflict) {
			return closed
		} else if err != nil {
			return err
		}
		prop := RegistrantProposal{Domain: r.Domain, Contact: pl.Contact, State: "confirmed"}
		if err := s.recordRegistrant(ctx, tx, t, prop, "confirmed by a signed-in person of the organisation ("+actor+")", now); err != nil {
			return err
		}
	} else {
		if err := tx.Mail().DeclineRegistrant(ctx, r.TokenHash); errors.Is(err, store.ErrConflict) {
			return closed
		} else if err != nil {
			return err
		}
		msg := "a person of the organisation declined " + pl.Contact.Name + " as registrant of " + r.Domain + "; nothing was recorded"
		steps := []TaskStep{{Name: "confirm_registrant", State: "denied", CompletedAt: &now, Detail: msg}, {Name: "record_registrant", State: "skipped"}}
		sj, _ := json.Marshal(steps)
		res, _ := json.Marshal(map[string]any{"decision": decision, "error": msg, "blockedBy": "approval:denied", "retryable": false, "domain": r.Domain})
		t.Steps, t.State, t.Result, t.GateID, t.UpdatedAt = string(sj), "failed", string(res), "", now
		if err := tx.Tasks().Update(ctx, t); err != nil {
			return err
		}
	}
	if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: actor, Action: "decide_gate", ObjectType: "gate", ObjectID: g.ID,
		Details: map[string]any{"kind": g.Kind, "decision": decision, "taskId": t.ID, "domain": r.Domain}}, now); err != nil {
		return err
	}
	if !approve {
		return nil
	}
	_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: actor, Action: "confirm_registrant", ObjectType: "domain", ObjectID: r.Domain,
		Details: map[string]any{"taskId": t.ID, "gateId": g.ID, "via": "signed_in_session"}}, now)
	return err
}
