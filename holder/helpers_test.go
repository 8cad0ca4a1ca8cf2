package holder_test

import (
	"encoding/json"
	"testing"
)

// replaceMember returns base with one member taken from donor.
func replaceMember(t *testing.T, base, donor []byte, name string) string {
	t.Helper()
	var b, d map[string]any
	if err := json.Unmarshal(base, &b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(donor, &d); err != nil {
		t.Fatal(err)
	}
	b[name] = d[name]
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
