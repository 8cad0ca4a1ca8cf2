package cmdutil

import (
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
	"github.com/muesli/termenv"
)

// lipglossStyles are the styles as human output made them with lipgloss,
// before Style: the reference TestStylesMatchLipgloss holds Style to.
type lipglossStyles struct {
	r                             *lipgloss.Renderer
	Key, Faint, Bold, Err, Header lipgloss.Style
}

func newLipglossStyles(env map[string]string, tty bool) lipglossStyles {
	r := lipgloss.NewRenderer(io.Discard)
	o := termenv.NewOutput(io.Discard, termenv.WithTTY(tty), termenv.WithEnvironment(mapEnviron(env)))
	r.SetColorProfile(o.EnvColorProfile())
	return lipglossStyles{
		r:      r,
		Key:    r.NewStyle().Foreground(lipgloss.Color("6")),
		Faint:  r.NewStyle().Faint(true),
		Bold:   r.NewStyle().Bold(true),
		Err:    r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		Header: r.NewStyle().Bold(true),
	}
}

type mapEnviron map[string]string

func (e mapEnviron) Getenv(k string) string { return e[k] }

func (e mapEnviron) Environ() []string {
	var env []string
	for k, v := range e {
		env = append(env, k+"="+v)
	}
	return env
}

func (l lipglossStyles) table(headers []string, rows [][]string) string {
	t := table.New().
		Border(lipgloss.NormalBorder()).
		BorderTop(false).BorderBottom(false).BorderLeft(false).BorderRight(false).
		BorderColumn(false).BorderHeader(true).
		BorderStyle(l.Faint).
		Headers(headers...).
		Rows(rows...).
		StyleFunc(func(row, col int) lipgloss.Style {
			s := l.r.NewStyle().PaddingRight(2)
			if row == table.HeaderRow {
				return s.Inherit(l.Header)
			}
			return s
		})
	lines := strings.Split(t.String(), "\n")
	for i, line := range lines {
		lines[i] = strings.TrimRight(line, " ")
	}
	return strings.Join(lines, "\n")
}

var styleEnvs = []struct {
	env map[string]string
	tty bool
}{
	{map[string]string{}, false},
	{map[string]string{}, true},
	{map[string]string{"TERM": "xterm-256color"}, true},
	{map[string]string{"TERM": "xterm-256color"}, false},
	{map[string]string{"TERM": "dumb"}, true},
	{map[string]string{"TERM": "xterm"}, true},
	{map[string]string{"TERM": "screen", "COLORTERM": "truecolor"}, true},
	{map[string]string{"TERM": "vt100", "COLORTERM": "yes"}, true},
	{map[string]string{"TERM": "xterm-kitty"}, true},
	{map[string]string{"TERM": "cons25-ansi"}, true},
	{map[string]string{"TERM": "xterm-256color", "NO_COLOR": "1"}, true},
	{map[string]string{"TERM": "xterm-256color", "CLICOLOR": "0"}, true},
	{map[string]string{"TERM": "xterm-256color", "CLICOLOR": "0", "CLICOLOR_FORCE": "1"}, true},
	{map[string]string{"CLICOLOR_FORCE": "1"}, false},
	{map[string]string{"CLICOLOR_FORCE": "0", "TERM": "xterm"}, true},
	{map[string]string{"CLICOLOR_FORCE": "1", "NO_COLOR": "1"}, false},
}

// Style, the styles' colour decision and the tables render what lipgloss
// rendered for the same text in every environment, byte for byte.
func TestStylesMatchLipgloss(t *testing.T) {
	texts := []string{"", "plain", "two words", "tab\there", "one\ntwo lines", "a\r\nbb\n\nccc", "wide 日本 — é", "\x1b[1m pre-styled"}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, c := range styleEnvs {
		f := &Factory{Getenv: func(k string) string { return c.env[k] }}
		got := NewStyles(f, func() bool { return c.tty })
		want := newLipglossStyles(c.env, c.tty)
		pairs := []struct {
			name string
			g    Style
			w    lipgloss.Style
		}{{"Key", got.Key, want.Key}, {"Faint", got.Faint, want.Faint}, {"Bold", got.Bold, want.Bold}, {"Err", got.Err, want.Err}, {"Header", got.Header, want.Header}}
		for _, p := range pairs {
			for _, s := range texts {
				if g, w := p.g.Render(s), p.w.Render(s); g != w {
					t.Errorf("%v tty=%v %s.Render(%q) = %q, lipgloss %q", c.env, c.tty, p.name, s, g, w)
				}
			}
			if g, w := p.g.Render("a", "b"), p.w.Render("a", "b"); g != w {
				t.Errorf("%v %s.Render(a, b) = %q, lipgloss %q", c.env, p.name, g, w)
			}
		}
		for range 20 {
			headers, rows := randomTable(rnd)
			w := want.table(headers, rows)
			if g := renderRows(got, headers, rows); g != w {
				t.Errorf("%v tty=%v table\n%q\nlipgloss\n%q", c.env, c.tty, g, w)
			}
		}
	}
}

func randomTable(rnd *rand.Rand) (headers []string, rows [][]string) {
	words := []string{"", "acme.dev", "yes", "no", "—", "$12.50", "état", "日本語", "a b", "x"}
	cols := 1 + rnd.IntN(5)
	for i := range cols {
		headers = append(headers, strings.Repeat("H", 1+rnd.IntN(8))+string(rune('A'+i)))
	}
	for range rnd.IntN(6) {
		row := make([]string, cols)
		for i := range row {
			row[i] = words[rnd.IntN(len(words))]
		}
		rows = append(rows, row)
	}
	return headers, rows
}

// A cell's line breaks become spaces and its tabs four spaces: a row
// stays one line. (lipgloss's table broke such cells over lines, so
// TestStylesMatchLipgloss leaves them out.)
func TestRowsKeepCellsOnOneLine(t *testing.T) {
	st := NewStyles(&Factory{Getenv: func(string) string { return "" }}, nil)
	got := renderRows(st, []string{"NAME"}, [][]string{{"two\nlines"}, {"c\r\nr"}, {"t\tb"}})
	want := "NAME\n───────────\ntwo lines\nc r\nt    b"
	if got != want {
		t.Errorf("renderRows = %q, want %q", got, want)
	}
}
