package registrar

import "testing"

func TestCatalogs(t *testing.T) {
	common, full := Catalog(false), Catalog(true)
	if len(common) != 10 || len(full) != 20 {
		t.Fatalf("common %d, full %d", len(common), len(full))
	}
	for i, tld := range common {
		if full[i].Name != tld.Name {
			t.Fatalf("the full catalog must start with the common one in order")
		}
	}
}

func TestCheck(t *testing.T) {
	dev, _ := Lookup("dev")
	if a, b := Check("deterministic", dev), Check("deterministic", dev); a != b {
		t.Fatal("availability is not deterministic")
	}
	if q := Check("example", dev); q.Available {
		t.Fatal("reserved name available")
	}
	if q := Check("ab", dev); !q.Premium || q.FirstYear != nil {
		t.Fatalf("two letters: %+v", q)
	}
	if q := Check("abc", dev); !q.Premium || *q.FirstYear != 20*USD(12, 0) {
		t.Fatalf("three letters: %+v", q)
	}
	ai, _ := Lookup("ai")
	if got := *ai.AnnualizedRenewal(); got != USD(79, 0) {
		t.Fatalf("ai annualized %d", got)
	}
	bank, _ := Lookup("bank")
	if bank.AnnualizedRenewal() != nil {
		t.Fatal("bank has no renewal price")
	}
}
