package contracttest

import (
	"strings"
	"testing"
)

// TestMutationsCarryTheEnvelopesMembers: the checker flags a mutation's
// answer without receipt, undo or budgetRemainingUsd, and passes reads and
// complete answers.
func TestMutationsCarryTheEnvelopesMembers(t *testing.T) {
	once.Do(setup)
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	send := doc.Paths.Find("/v1/messages").Post
	estimate := doc.Paths.Find("/v1/estimate").Post
	complete := `{"data":{"messageId":"m","receipt":{},"undo":{"command":null,"irreversible":true},"budgetRemainingUsd":0}}`
	cases := []struct {
		name, method, body string
		flagged            bool
	}{
		{"a mutation without the members", "POST", `{"data":{"messageId":"m"}}`, true},
		{"a mutation with a null undo", "POST", strings.Replace(complete, `{"command":null,"irreversible":true}`, "null", 1), true},
		{"a complete mutation", "POST", complete, false},
	}
	for _, c := range cases {
		if p := mutationProblem(c.method, send, []byte(c.body)); (p != "") != c.flagged {
			t.Errorf("%s: %q", c.name, p)
		}
	}
	if p := mutationProblem("POST", estimate, []byte(`{"data":{"totalUsd":1}}`)); p != "" {
		t.Errorf("a read-only POST was held to a mutation's members: %s", p)
	}
}
