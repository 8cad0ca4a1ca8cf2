package service

import (
	"context"
	"errors"
	"strings"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// mailBudget is what remains of the budget of the project that set up
// mail for the domain of address (an address or a bare domain): mail is
// paid from the project whose quote set it up. 0 when none is found.
func mailBudget(ctx context.Context, st mailBudgetStore, orgID, address string) (money.MicroUSD, error) {
	domain := address[strings.LastIndex(address, "@")+1:]
	d, err := st.Mail().Domain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && (d.OrgID != orgID || d.TaskID == "") {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	t, err := st.Tasks().Get(ctx, orgID, d.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return budgetLeftMicro(ctx, st, orgID, t.ProjectID)
}

// addressChange is an address as created or deleted, with the mutation's
// receipt, how to undo it and the budget that remains.
func addressChange(ctx context.Context, s *Mail, op string, a store.EmailAddress, undo *Reversal) (*AddressChange, error) {
	left, err := mailBudget(ctx, s.store, a.OrgID, a.Domain)
	if err != nil {
		return nil, err
	}
	var created []Resource
	if op == "create_email_address" {
		created = []Resource{{Type: "email_address", ID: a.ID}, {Type: "inbox", ID: a.InboxID}}
	}
	return &AddressChange{EmailAddress: addressView(a), Mutated: s.mutated(op, nil, created, undo, left)}, nil
}
