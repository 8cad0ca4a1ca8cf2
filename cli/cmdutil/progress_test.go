package cmdutil

import (
	"bytes"
	"testing"
)

// On a terminal a log line clears the spinner's line first; off one, with
// --json, progress and log lines stay off stderr.
func TestProgressLine(t *testing.T) {
	var stderr bytes.Buffer
	f := NewFactory(&IOStreams{ErrOut: &stderr})
	f.IO.StderrIsTerminal = func() bool { return true }
	p := NewProgress(f)
	p.Step("start (running)")
	p.Line("  stdout listening")
	p.Step("deploy (running)")
	p.Done()
	if want := "\r\033[K⠙ start (running)\r\033[K  stdout listening\n\r\033[K⠹ deploy (running)\r\033[K"; stderr.String() != want {
		t.Errorf("terminal stderr %q, want %q", &stderr, want)
	}
	stderr.Reset()
	f = NewFactory(&IOStreams{ErrOut: &stderr})
	f.Config.JSON = true
	p = NewProgress(f)
	p.Step("start (running)")
	p.Line("  stdout listening")
	if stderr.Len() != 0 {
		t.Errorf("--json off a terminal: stderr %q", &stderr)
	}
}
