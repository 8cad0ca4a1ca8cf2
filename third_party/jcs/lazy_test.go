package jcs

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The RFC 8785 vectors upstream ships (testdata/input and testdata/output)
// still canonicalise byte for byte.
func TestVectors(t *testing.T) {
	names, err := filepath.Glob("testdata/input/*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, in := range names {
		input, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata/output", filepath.Base(in)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Transform(input)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}

// The number grammar compiled on first use (README.pier.md) accepts and
// refuses what upstream's package-level pattern does, from concurrent
// first uses.
func TestNumberPatternOnFirstUse(t *testing.T) {
	upstream := regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	tokens := []string{"0", "-0", "1", "10", "1.5", "-1.5e10", "1E+2", "1e-2", "01", "+1", ".5", "5.",
		"0x10", "1_000", "1e", "--1", "Infinity", "NaN", "1.0e400", "9007199254740993", ""}
	done := make(chan bool)
	for i := 0; i < 4; i++ {
		go func() {
			for _, tok := range tokens {
				if numberPattern().MatchString(tok) != upstream.MatchString(tok) {
					t.Errorf("%q: the pattern and upstream's disagree", tok)
				}
			}
			done <- true
		}()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	for _, tok := range tokens[:len(tokens)-1] { // "[]" is an empty array
		doc := []byte("[" + tok + "]")
		_, err := Transform(doc)
		if upstream.MatchString(tok) && err != nil && tok != "1.0e400" {
			t.Errorf("Transform(%s): %v", doc, err)
		}
		if !upstream.MatchString(tok) && err == nil {
			t.Errorf("Transform(%s) accepted a token outside the grammar", doc)
		}
	}
}
