package main

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/server"
)

// TestREADMECommandsParse reads every pier command in README.md's sh
// blocks, as a newcomer pastes them once pier is installed, and requires
// that each names a command that exists with flags it takes. It also
// holds the README to running pier itself: go run ./cmd/pier appears only
// to start the server on a fresh machine, since go run reports every
// failure as exit 1 and a script would lose the documented codes.
func TestREADMECommandsParse(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	root := cli.NewRootCmd(cmdutil.NewFactory(cmdutil.SystemIOStreams()))
	for _, c := range server.NewCommands() {
		if existing, _, err := root.Find([]string{c.Name()}); err == nil && existing != root {
			for _, sub := range c.Commands() {
				existing.AddCommand(sub)
			}
			continue
		}
		root.AddCommand(c)
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```")
	cmdStart := regexp.MustCompile(`(?:^|\$\(|&& |; )(pier|go run \./cmd/pier) `)
	checked := 0
	for _, m := range block.FindAllStringSubmatch(string(b), -1) {
		// Join continued lines.
		text := strings.ReplaceAll(m[1], "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			for _, loc := range cmdStart.FindAllStringSubmatchIndex(line, -1) {
				how := line[loc[2]:loc[3]]
				rest := line[loc[3]+1:]
				words := readmeWords(rest)
				if how != "pier" && !(len(words) > 0 && words[0] == "server") {
					t.Errorf("README runs %q through go run, which turns every exit code into 1: %s", words, line)
				}
				if len(words) == 0 {
					continue
				}
				cmd, args, err := root.Find(words)
				if err != nil || cmd == root {
					t.Errorf("README: pier %s: no such command", strings.Join(words, " "))
					continue
				}
				if cmd.DisableFlagParsing {
					continue
				}
				if err := cmd.ParseFlags(args); err != nil && !errors.Is(err, pflag.ErrHelp) {
					t.Errorf("README: pier %s: %v", strings.Join(words, " "), err)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d pier commands found in README.md's sh blocks", checked)
	}
}

// readmeWords splits a README command the way a shell would, far enough to
// find its command and flags: quotes kept together, and it ends at a pipe,
// a redirection, a comment, a closing $( ) or another command.
func readmeWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote byte
	in := false
	flush := func() {
		if in {
			out = append(out, cur.String())
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			flush()
		case c == '|' || c == '>' || c == '#' || c == ')' || c == ';' || c == '&' || c == '<':
			flush()
			return out
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			// A nested $( … ) value: skip to its end.
			depth := 0
			for ; i < len(s); i++ {
				if s[i] == '(' {
					depth++
				} else if s[i] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			cur.WriteString("x")
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	flush()
	return out
}
