package cmdutil

import (
	"fmt"
)

// Progress shows the current step on stderr: a spinner on a terminal, a
// line per change otherwise. Nothing goes to stdout.
type Progress struct {
	f      *Factory
	tty    bool
	last   string
	frame  int
	active bool
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// NewProgress returns the progress of a command over f's stderr.
func NewProgress(f *Factory) *Progress {
	return &Progress{f: f, tty: f.IO.StderrIsTerminal != nil && f.IO.StderrIsTerminal()}
}

// Step shows s as the current step: redrawn on a terminal, a line when it
// changes otherwise, nothing off a terminal with --json.
func (p *Progress) Step(s string) {
	if p.f.Config.JSON && !p.tty {
		return
	}
	if p.tty {
		p.frame++
		fmt.Fprintf(p.f.IO.ErrOut, "\r\033[K%s %s", spinner[p.frame%len(spinner)], s)
		p.active = true
		return
	}
	if s != p.last {
		fmt.Fprintf(p.f.IO.ErrOut, "… %s\n", s)
	}
	p.last = s
}

// Line prints a line of its own on stderr, such as a log line, above the
// spinner on a terminal.
func (p *Progress) Line(s string) {
	if p.f.Config.JSON && !p.tty {
		return
	}
	if p.tty && p.active {
		fmt.Fprint(p.f.IO.ErrOut, "\r\033[K")
		p.active = false
	}
	fmt.Fprintln(p.f.IO.ErrOut, s)
}

// Done clears the spinner's line on a terminal.
func (p *Progress) Done() {
	if p.tty && p.active {
		fmt.Fprint(p.f.IO.ErrOut, "\r\033[K")
		p.active = false
	}
}

// TTY reports whether the progress is drawn on a terminal (a spinner
// line that is redrawn) rather than as a line per change.
func (p *Progress) TTY() bool { return p.tty }
