package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func (w world) address(t *testing.T, id, address string, catchAll bool, limit int64) store.EmailAddress {
	t.Helper()
	a := store.EmailAddress{ID: id, OrgID: w.org, Domain: "shop.dev", Address: address, CatchAll: catchAll, InboxID: "inb_" + id, CreatedAt: t0}
	must(t, w.st.Mail().CreateAddress(ctx, a, limit))
	return a
}

func messageIDs(ms []store.Message) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestMail(t *testing.T) { runCases(t, mailCases) }

// mailCases are TestMail's cases, each run on every engine.
var mailCases = []storeCase{
	{"domains: put keeps the first key", func(t *testing.T, w world) {
		mail := w.st.Mail()
		_, err := mail.Domain(ctx, "shop.dev")
		wantErr(t, "no set-up", err, store.ErrNotFound)
		d := store.MailDomain{Domain: "shop.dev", OrgID: w.org, Selector: "s1", PrivateKey: "priv1", PublicKey: "pub1", State: "setting_up", TaskID: "tsk_1", CreatedAt: t0, UpdatedAt: t0}
		if got, err := mail.PutDomain(ctx, d); err != nil || got != d {
			t.Fatalf("put %+v, %v", got, err)
		}
		retry := d
		retry.PrivateKey, retry.Selector = "priv2", "s2"
		if got, err := mail.PutDomain(ctx, retry); err != nil || got != d {
			t.Fatalf("retry replaced the key: %+v, %v", got, err)
		}
		must(t, mail.SetDomainState(ctx, "shop.dev", "ready", "tsk_2", t0.Add(time.Minute)))
		if got, _ := mail.Domain(ctx, "shop.dev"); got.State != "ready" || got.TaskID != "tsk_2" || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("after state %+v", got)
		}
	}},
	{"domains: claims", func(t *testing.T, w world) {
		mail := w.st.Mail()
		b := w.other(t, "org_b")
		w.task(t, "tsk_1", "running")
		d := store.MailDomain{Domain: "shop.dev", OrgID: w.org, Selector: "s1", PrivateKey: "priv1", PublicKey: "pub1", TaskID: "tsk_1", CreatedAt: t0, UpdatedAt: t0}
		if ok, err := mail.ClaimDomain(ctx, d); !ok || err != nil {
			t.Fatalf("first claim %v, %v", ok, err)
		}
		d2 := d
		d2.TaskID, d2.PrivateKey = "tsk_2", "priv2"
		if ok, err := mail.ClaimDomain(ctx, d2); ok || err != nil {
			t.Fatalf("claimed while being set up: %v, %v", ok, err)
		}
		// The setup task failed: the next claim takes over, keeping the key.
		must(t, w.st.Tasks().Update(ctx, store.Task{ID: "tsk_1", State: "failed", Steps: "[]", UpdatedAt: t0}))
		if ok, err := mail.ClaimDomain(ctx, d2); !ok || err != nil {
			t.Fatalf("claim after a failed setup %v, %v", ok, err)
		}
		if got, _ := mail.Domain(ctx, "shop.dev"); got.TaskID != "tsk_2" || got.PrivateKey != "priv1" || got.State != "setting_up" {
			t.Fatalf("after the takeover %+v", got)
		}
		// The domain changed hands: the new organisation's key.
		d3 := d
		d3.OrgID, d3.TaskID, d3.PrivateKey, d3.Selector = b.org, "tsk_3", "priv3", "s3"
		if ok, err := mail.ClaimDomain(ctx, d3); !ok || err != nil {
			t.Fatalf("claim by the new holder %v, %v", ok, err)
		}
		if got, _ := mail.Domain(ctx, "shop.dev"); got.OrgID != b.org || got.PrivateKey != "priv3" || got.Selector != "s3" {
			t.Fatalf("after changing hands %+v", got)
		}
		must(t, mail.SetDomainState(ctx, "shop.dev", "removed", "tsk_3", t0))
		d4 := d3
		d4.TaskID = "tsk_4"
		if ok, err := mail.ClaimDomain(ctx, d4); !ok || err != nil {
			t.Fatalf("claim after removal %v, %v", ok, err)
		}
	}},
	{"concurrent claims: one setup", func(t *testing.T, w world) {
		var won [6]bool
		race(t, len(won), func(i int) error {
			ok, err := w.st.Mail().ClaimDomain(ctx, store.MailDomain{Domain: "shop.dev", OrgID: w.org, Selector: "s", PrivateKey: "p", PublicKey: "p",
				TaskID: "tsk_" + string(rune('a'+i)), CreatedAt: t0, UpdatedAt: t0})
			won[i] = ok
			return err
		})
		if n := len(slices.DeleteFunc(won[:], func(b bool) bool { return !b })); n != 1 {
			t.Fatalf("%d setups claimed the domain", n)
		}
	}},
	{"addresses, one live per name, one catch-all", func(t *testing.T, w world) {
		mail := w.st.Mail()
		a := w.address(t, "adr_1", "hi@shop.dev", false, 100)
		wantErr(t, "an address taken", mail.CreateAddress(ctx, store.EmailAddress{ID: "adr_2", OrgID: w.org, Domain: "shop.dev", Address: "hi@shop.dev", InboxID: "inb_2", CreatedAt: t0}, 100), store.ErrConflict)
		if inboxes, _ := mail.Inboxes(ctx, w.org, store.Filter{}); len(inboxes) != 1 {
			t.Fatalf("a refused address left an inbox: %+v", inboxes)
		}
		all := w.address(t, "adr_all", "*@shop.dev", true, 100)
		wantErr(t, "a second catch-all", mail.CreateAddress(ctx, store.EmailAddress{ID: "adr_3", OrgID: w.org, Domain: "shop.dev", Address: "any@shop.dev", CatchAll: true, InboxID: "inb_3", CreatedAt: t0}, 100), store.ErrConflict)
		if got, err := mail.Address(ctx, w.org, "adr_1"); err != nil || got != a {
			t.Fatalf("address %+v, %v", got, err)
		}
		_, err := mail.Address(ctx, "org_other", "adr_1")
		wantErr(t, "another organisation's address", err, store.ErrNotFound)
		if got, err := mail.Route(ctx, "hi@shop.dev", "shop.dev"); err != nil || got.ID != a.ID {
			t.Fatalf("route to its own %+v, %v", got, err)
		}
		if got, err := mail.Route(ctx, "else@shop.dev", "shop.dev"); err != nil || got.ID != all.ID || !got.CatchAll {
			t.Fatalf("route to the catch-all %+v, %v", got, err)
		}
		_, err = mail.Route(ctx, "hi@other.dev", "other.dev")
		wantErr(t, "no route", err, store.ErrNotFound)
		if got, err := mail.Addresses(ctx, w.org, store.Filter{Limit: 10}); err != nil || len(got) != 2 {
			t.Fatalf("addresses %+v, %v", got, err)
		}
		must(t, mail.DeleteAddress(ctx, w.org, "adr_1", t0.Add(time.Minute)))
		wantErr(t, "deleted twice", mail.DeleteAddress(ctx, w.org, "adr_1", t0), store.ErrNotFound)
		wantErr(t, "another organisation deletes", mail.DeleteAddress(ctx, "org_other", "adr_all", t0), store.ErrNotFound)
		if got, _ := mail.Address(ctx, w.org, "adr_1"); got.DeletedAt == nil || !got.DeletedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("deleted address %+v", got)
		}
		if got, _ := mail.Route(ctx, "hi@shop.dev", "shop.dev"); got.ID != all.ID {
			t.Fatalf("a deleted address still takes mail: %+v", got)
		}
		if got, _ := mail.Addresses(ctx, w.org, store.Filter{Limit: 10}); len(got) != 1 {
			t.Fatalf("addresses after deleting %+v", got)
		}
		w.address(t, "adr_again", "hi@shop.dev", false, 100) // the name is free again
	}},
	{"concurrent addresses of one name: one", func(t *testing.T, w world) {
		wins := race(t, 6, func(i int) error {
			id := string(rune('a' + i))
			return w.st.Mail().CreateAddress(ctx, store.EmailAddress{ID: "adr_" + id, OrgID: w.org, Domain: "shop.dev", Address: "hi@shop.dev", InboxID: "inb_" + id, CreatedAt: t0}, 100)
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("%d addresses named hi@shop.dev", wins)
		}
	}},
	{"deliver within the limit, delete gives bytes back", func(t *testing.T, w world) {
		mail := w.st.Mail()
		a := w.address(t, "adr_1", "hi@shop.dev", false, 100)
		msg := func(id string, size int64, at time.Time) store.Message {
			return store.Message{ID: id, InboxID: a.InboxID, OrgID: w.org, MailFrom: "a@x.test", Rcpt: `["hi@shop.dev"]`, FromHeader: "A <a@x.test>",
				Subject: "s", ReceivedAt: at, Size: size, Headers: "{}", Text: "t", HTML: "", Attachments: "[]", Auth: "{}", RawSHA256: "raw"}
		}
		m1 := msg("msg_1", 60, t0)
		must(t, mail.Deliver(ctx, m1))
		wantErr(t, "over the inbox's limit", mail.Deliver(ctx, msg("msg_2", 41, t0)), store.ErrBudget)
		must(t, mail.Deliver(ctx, msg("msg_3", 40, t0)))
		inbox, err := mail.Inbox(ctx, w.org, a.InboxID)
		if err != nil || inbox.BytesUsed != 100 || inbox.BytesLimit != 100 || inbox.Messages != 2 || inbox.Address != "hi@shop.dev" {
			t.Fatalf("inbox %+v, %v", inbox, err)
		}
		if got, err := mail.Message(ctx, w.org, "msg_1"); err != nil || got != m1 {
			t.Fatalf("message %+v, %v", got, err)
		}
		_, err = mail.Message(ctx, w.org, "msg_2")
		wantErr(t, "a refused message", err, store.ErrNotFound)
		if got, err := mail.DeleteMessage(ctx, w.org, "msg_1"); err != nil || got != m1 {
			t.Fatalf("delete %+v, %v", got, err)
		}
		_, err = mail.DeleteMessage(ctx, w.org, "msg_1")
		wantErr(t, "deleted twice", err, store.ErrNotFound)
		_, err = mail.DeleteMessage(ctx, "org_other", "msg_3")
		wantErr(t, "another organisation deletes", err, store.ErrNotFound)
		if inbox, _ := mail.Inbox(ctx, w.org, a.InboxID); inbox.BytesUsed != 40 || inbox.Messages != 1 {
			t.Fatalf("inbox after deleting %+v", inbox)
		}
		_, err = mail.Inbox(ctx, "org_other", a.InboxID)
		wantErr(t, "another organisation's inbox", err, store.ErrNotFound)
	}},
	{"concurrent deliveries never overfill an inbox", func(t *testing.T, w world) {
		a := w.address(t, "adr_1", "hi@shop.dev", false, 100)
		wins := race(t, 10, func(i int) error {
			return w.st.Mail().Deliver(ctx, store.Message{ID: "msg_" + string(rune('a'+i)), InboxID: a.InboxID, OrgID: w.org, ReceivedAt: t0, Size: 30})
		}, store.ErrBudget)
		inbox, _ := w.st.Mail().Inbox(ctx, w.org, a.InboxID)
		if wins != 3 || inbox.BytesUsed != 90 || inbox.Messages != 3 {
			t.Fatalf("%d delivered; inbox %+v", wins, inbox)
		}
	}},
	{"messages filtered and paged", func(t *testing.T, w world) {
		mail := w.st.Mail()
		a := w.address(t, "adr_1", "hi@shop.dev", false, 1<<20)
		for i, c := range []struct{ id, from, subject string }{
			{"msg_1", "Alice <alice@x.test>", "Invoice 50% off"},
			{"msg_2", "Bob <bob@y.test>", "invoice 500 off"},
			{"msg_3", "Carol <carol@x.test>", "a_b"},
			{"msg_4", "Dave <dave@z.test>", "axb"},
		} {
			must(t, mail.Deliver(ctx, store.Message{ID: c.id, InboxID: a.InboxID, OrgID: w.org, MailFrom: "bounce@" + c.id + ".test", FromHeader: c.from,
				Subject: c.subject, ReceivedAt: t0.Add(time.Duration(i) * time.Second), Size: 1}))
		}
		for _, c := range []struct {
			f    store.MessageFilter
			want []string
		}{
			{store.MessageFilter{}, []string{"msg_4", "msg_3", "msg_2", "msg_1"}},
			{store.MessageFilter{Oldest: true, Limit: 2}, []string{"msg_1", "msg_2"}},
			{store.MessageFilter{From: "X.TEST"}, []string{"msg_3", "msg_1"}},
			{store.MessageFilter{From: "msg_2"}, []string{"msg_2"}}, // the envelope sender
			{store.MessageFilter{Subject: "INVOICE"}, []string{"msg_2", "msg_1"}},
			{store.MessageFilter{Subject: "50%"}, []string{"msg_1"}},
			{store.MessageFilter{Subject: "a_b"}, []string{"msg_3"}},
			{store.MessageFilter{Since: t0.Add(2 * time.Second)}, []string{"msg_4", "msg_3"}},
			{store.MessageFilter{Before: "msg_3"}, []string{"msg_2", "msg_1"}},
			{store.MessageFilter{Before: "msg_2", Oldest: true}, []string{"msg_1"}},
		} {
			got, err := mail.Messages(ctx, w.org, a.InboxID, c.f)
			if err != nil || !slices.Equal(messageIDs(got), c.want) {
				t.Errorf("messages %+v: %v, %v; want %v", c.f, messageIDs(got), err, c.want)
			}
		}
		if got, _ := mail.Messages(ctx, "org_other", a.InboxID, store.MessageFilter{}); len(got) != 0 {
			t.Fatalf("another organisation reads %v", messageIDs(got))
		}
		if got, err := mail.Inboxes(ctx, w.org, store.Filter{}); err != nil || len(got) != 1 || got[0].Messages != 4 {
			t.Fatalf("inboxes %+v, %v", got, err)
		}
	}},
	{"registrants: proposed, superseded, confirmed once", func(t *testing.T, w world) {
		mail := w.st.Mail()
		b := w.other(t, "org_b")
		r1 := store.Registrant{Domain: "shop.dev", OrgID: w.org, Contact: `{"n":1}`, TokenHash: "h1", TaskID: "tsk_1", CreatedAt: t0}
		if older, err := mail.ProposeRegistrant(ctx, r1); err != nil || len(older) != 0 {
			t.Fatalf("first proposal %v, %v", older, err)
		}
		r2 := r1
		r2.Contact, r2.TokenHash, r2.TaskID = `{"n":2}`, "h2", "tsk_2"
		older, err := mail.ProposeRegistrant(ctx, r2)
		if err != nil || len(older) != 1 || older[0].TaskID != "tsk_1" || older[0].State != "pending" {
			t.Fatalf("superseded %+v, %v", older, err)
		}
		wantErr(t, "a superseded link", mail.ConfirmRegistrant(ctx, "h1", t0), store.ErrConflict)
		_, err = mail.CurrentRegistrant(ctx, w.org, "shop.dev")
		wantErr(t, "none confirmed", err, store.ErrNotFound)
		wins := race(t, 6, func(int) error { return mail.ConfirmRegistrant(ctx, "h2", t0.Add(time.Minute)) }, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("confirmed %d times", wins)
		}
		wantErr(t, "declining a confirmed one", mail.DeclineRegistrant(ctx, "h2"), store.ErrConflict)
		got, err := mail.CurrentRegistrant(ctx, w.org, "shop.dev")
		if err != nil || got.Contact != `{"n":2}` || got.State != "confirmed" || got.ConfirmedAt == nil || !got.ConfirmedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("current %+v, %v", got, err)
		}
		_, err = mail.CurrentRegistrant(ctx, b.org, "shop.dev")
		wantErr(t, "another organisation's registrant", err, store.ErrNotFound)
		if got, err := mail.RegistrantByToken(ctx, "h1"); err != nil || got.State != "superseded" {
			t.Fatalf("by token %+v, %v", got, err)
		}
		if got, err := mail.RegistrantByTask(ctx, "shop.dev", "tsk_2"); err != nil || got.TokenHash != "h2" {
			t.Fatalf("by task %+v, %v", got, err)
		}
		_, err = mail.RegistrantByToken(ctx, "h_none")
		wantErr(t, "unknown token", err, store.ErrNotFound)
		r3 := r1
		r3.TokenHash, r3.TaskID = "h3", "tsk_3"
		_, err = mail.ProposeRegistrant(ctx, r3)
		must(t, err)
		must(t, mail.DeclineRegistrant(ctx, "h3"))
		wantErr(t, "declined twice", mail.DeclineRegistrant(ctx, "h3"), store.ErrConflict)
		wantErr(t, "confirming a declined one", mail.ConfirmRegistrant(ctx, "h3", t0), store.ErrConflict)
	}},
}
