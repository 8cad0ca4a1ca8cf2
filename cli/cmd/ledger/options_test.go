package ledger

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

func TestLedgerVerifyOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want LedgerVerifyOptions
	}{
		{[]string{"ledger.jsonl"}, LedgerVerifyOptions{File: "ledger.jsonl"}},
		{[]string{"-", "--partial", "--json"}, LedgerVerifyOptions{File: "-", Partial: true, JSON: true}},
	} {
		f, ts := clitest.NewFactory(nil)
		var got *LedgerVerifyOptions
		if code := clitest.RunWith(t, f, NewCmdLedgerVerify(f, func(o *LedgerVerifyOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
		}
		if got.IO != f.IO {
			t.Errorf("%v: the options do not carry the factory's streams", c.args)
		}
		got.IO = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	for _, args := range [][]string{nil, {"a.jsonl", "b.jsonl"}} {
		f, _ := clitest.NewFactory(nil)
		called := false
		if code := clitest.RunWith(t, f, NewCmdLedgerVerify(f, func(*LedgerVerifyOptions) error { called = true; return nil }), args...); code != cmdutil.ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}

func TestLedgerExportOptions(t *testing.T) {
	for _, c := range []struct {
		args     []string
		out      string
		pageSize int
	}{
		{[]string{"--out", "ledger.jsonl"}, "ledger.jsonl", 1000},
		{[]string{"-o", "-", "--page-size", "50"}, "-", 50},
	} {
		f, ts := clitest.NewFactory(nil)
		var got *LedgerExportOptions
		if code := clitest.RunWith(t, f, NewCmdLedgerExport(f, func(o *LedgerExportOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
		}
		if got.IO != f.IO || got.Out != c.out || got.PageSize != c.pageSize || got.Fetch == nil {
			t.Errorf("%v: %+v, want out %q, page size %d and a fetch", c.args, *got, c.out, c.pageSize)
		}
	}
	for _, args := range [][]string{nil, {"--out", "x", "--page-size", "0"}, {"--out", "x", "--page-size", "1001"}} {
		f, _ := clitest.NewFactory(nil)
		called := false
		if code := clitest.RunWith(t, f, NewCmdLedgerExport(f, func(*LedgerExportOptions) error { called = true; return nil }), args...); code != cmdutil.ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}

	// The fetch handed to runF pages GET /v1/ledger at the base URL, with
	// the API key.
	var gotPath, gotQuery, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery, gotAuth = r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization")
		clitest.WriteEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"entries":[]},"formatVersion":"1"}`)
	}))
	defer srv.Close()
	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_test"})
	var got *LedgerExportOptions
	if code := clitest.RunWith(t, f, NewCmdLedgerExport(f, func(o *LedgerExportOptions) error { got = o; return nil }), "--out", "-"); code != cmdutil.ExitOK {
		t.Fatalf("exit %d %s", code, ts.Err)
	}
	if _, err := got.Fetch(context.Background(), 4, 10); err != nil {
		t.Fatal(err)
	}
	if gotPath != "/v1/ledger" || gotQuery != "after=4&limit=10" || gotAuth != "Bearer agk_test" {
		t.Errorf("fetch sent %s?%s with %q", gotPath, gotQuery, gotAuth)
	}
}
