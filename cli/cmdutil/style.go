package cmdutil

import (
	"strings"

	"github.com/mattn/go-runewidth"
)

// Style is one of the few text styles human output uses: a Select
// Graphic Rendition sequence, or none when the stream gets no colour.
//
// It used to be lipgloss's Style. Human output needs four styles and one
// kind of table, and lipgloss brought a terminal stack of nine modules
// whose package inits and function tables every `pier` start paid for
// (bench/README.md, "CLI start"); TestStylesMatchLipgloss holds this
// rendering to lipgloss's, byte for byte.
type Style struct {
	sgr string // "1;31"; empty: no sequences
	set bool   // a style was asked for, colour or not
}

// tabWidth is what a tab becomes, in spaces, as in lipgloss.
const tabWidth = 4

// Render joins strs with spaces and styles each line. A tab becomes four
// spaces and the lines of a multi-line text are padded to the widest, as
// lipgloss does.
func (s Style) Render(strs ...string) string {
	str := strings.ReplaceAll(strings.Join(strs, " "), "\t", strings.Repeat(" ", tabWidth))
	if !s.set {
		return str
	}
	str = strings.ReplaceAll(str, "\r\n", "\n")
	if !strings.Contains(str, "\n") {
		return s.wrap(str)
	}
	lines := strings.Split(str, "\n")
	widest := 0
	for _, l := range lines {
		widest = max(widest, runewidth.StringWidth(l))
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s.wrap(l))
		b.WriteString(strings.Repeat(" ", widest-runewidth.StringWidth(l)))
	}
	return b.String()
}

func (s Style) wrap(str string) string {
	if s.sgr == "" {
		return str
	}
	return "\x1b[" + s.sgr + "m" + str + "\x1b[0m"
}

// Styles are the few styles human output uses, for one stream, so that
// colour follows that stream.
type Styles struct {
	Key, Faint, Bold, Err, Header Style
}

// NewStyles returns styles for a stream. Colour follows the stream's
// terminal test (tty) and the environment as the Factory reads it:
// NO_COLOR, CLICOLOR=0 and TERM=dumb turn it off, and CLICOLOR_FORCE turns
// it on off a terminal too.
func NewStyles(f *Factory, tty func() bool) Styles {
	on := colorOn(f.Env, IsTerminal(tty))
	style := func(sgr string) Style {
		if !on {
			sgr = ""
		}
		return Style{sgr: sgr, set: true}
	}
	return Styles{
		Key:    style("36"),
		Faint:  style("2"),
		Bold:   style("1"),
		Err:    style("1;31"),
		Header: style("1"),
	}
}

// colorOn decides whether a stream gets colour, as termenv's
// EnvColorProfile does: any palette but none means the four styles'
// sequences, which are the same in every palette.
func colorOn(env func(string) string, tty bool) bool {
	forced := env("CLICOLOR_FORCE") != "" && env("CLICOLOR_FORCE") != "0"
	if env("NO_COLOR") != "" || (env("CLICOLOR") == "0" && !forced) {
		return false
	}
	return forced || (tty && termHasColor(env))
}

// termHasColor reads TERM, COLORTERM and TERM_PROGRAM as termenv does.
func termHasColor(env func(string) string) bool {
	switch strings.ToLower(env("COLORTERM")) {
	case "24bit", "truecolor", "yes", "true":
		return true
	}
	term := env("TERM")
	switch term {
	case "alacritty", "contour", "rio", "wezterm", "xterm-ghostty", "xterm-kitty", "linux", "xterm":
		return true
	}
	return strings.Contains(term, "color") || strings.Contains(term, "ansi")
}

// renderRows lays out a table: the header in st.Header, a faint rule
// under it, every column as wide as its widest cell and two spaces,
// and no spaces at the ends of lines.
func renderRows(st Styles, headers []string, rows [][]string) string {
	clean := func(c string) string {
		c = strings.ReplaceAll(c, "\t", strings.Repeat(" ", tabWidth))
		return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(c)
	}
	widths := make([]int, len(headers))
	for i, h := range headers {
		headers[i] = clean(h)
		widths[i] = runewidth.StringWidth(headers[i]) + 2
	}
	for _, row := range rows {
		for i := range row {
			row[i] = clean(row[i])
			widths[i] = max(widths[i], runewidth.StringWidth(row[i])+2)
		}
	}
	var b strings.Builder
	line := func(cells []string, style func(string) string) {
		var l strings.Builder
		for i, c := range cells {
			l.WriteString(style(c))
			l.WriteString(strings.Repeat(" ", widths[i]-runewidth.StringWidth(c)))
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
	}
	line(headers, func(c string) string { return st.Header.Render(c) })
	b.WriteByte('\n')
	for _, w := range widths {
		b.WriteString(st.Faint.Render(strings.Repeat("─", w)))
	}
	for _, row := range rows {
		b.WriteByte('\n')
		line(row, func(c string) string { return c })
	}
	return b.String()
}
