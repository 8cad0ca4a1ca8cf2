package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// globalFlags are the CLI's fixed global flags; an operation flag may not
// shadow one.
var globalFlags = map[string]bool{
	"base-url": true, "api-key": true, "json": true, "yes": true, "no-wait": true,
	"data": true, "help": true, "timeout": true, "idempotency-key": false,
}

var groupShort = map[string]string{
	"billing":   "Card setup for an existing account",
	"bundles":   "Static asset bundles",
	"domains":   "Domain search and registrant contacts",
	"email":     "Mail for owned domains: addresses, inboxes, messages",
	"addresses": "Email addresses and the inboxes they deliver to",
	"messages":  "Received messages",
	"projects":  "Launches and leave packages",
	"quotes":    "Quotes that hold project budget",
	"reference": "The published sandbox reference release",
	"sandbox":   "The fake-money mandate and approval sandbox",
	"services":  "Running services: list, read, logs, variables, rollback and teardown",
	"env":       "A service's variables; secret values are write-only",
	"signup":    "Sign up and claim an API key",
	"tasks":     "Durable tasks",
	"workflows": "Prepared operation graphs",
	"sessions":  "Sandbox sessions",
	"mandates":  "Holder mandates",
	"attempts":  "Sandbox agent attempts",
	"gates":     "Holder gate decisions",
	"ledger":    "The hash-chained audit ledger",
	"proofs":    "Sandbox proofs",
}

type cliFlag struct {
	Flag, Field, In, Kind, Usage string
	Required                     bool
	Enum                         []string
}

func flagKind(s map[string]any) string {
	switch str(s["type"]) {
	case "object":
		// A map of names to strings (variables): NAME=VALUE, repeatable.
		if ap := obj(s["additionalProperties"]); str(ap["type"]) == "string" && s["properties"] == nil {
			return "vars"
		}
	case "string":
		return "string"
	case "integer":
		return "int"
	case "number":
		return "number"
	case "boolean":
		return "bool"
	case "array":
		items := obj(s["items"])
		if t := str(items["type"]); t == "string" || t == "" && items["$ref"] == nil {
			return "strings"
		}
		if t := str(items["type"]); t == "string" {
			return "strings"
		}
		return "json"
	}
	return "json"
}

func genCLI(ops []*operation) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package operations\n\nimport (\n\t\"github.com/spf13/cobra\"\n\n\t\"github.com/pierhq/pier/cli/cmdutil\"\n)\n\n")
	b.WriteString("// AddCommands adds one command per contract operation.\n")
	b.WriteString("func AddCommands(root *cobra.Command, f *cmdutil.Factory, runF func(*cmdutil.OperationOptions) error) {\n")
	b.WriteString("\tgroups := map[string]*cobra.Command{}\n")

	seenCmd := map[string]string{}
	var groupPaths []string
	groupSeen := map[string]bool{}
	type leaf struct {
		group string
		code  string
	}
	var leaves []leaf
	for _, op := range ops {
		if op.CLI.Exclude {
			continue
		}
		words := strings.Fields(op.CLI.Command)
		if prev, ok := seenCmd[op.CLI.Command]; ok {
			return nil, fmt.Errorf("command %q used by %s and %s", op.CLI.Command, prev, op.ID)
		}
		seenCmd[op.CLI.Command] = op.ID
		for i := 1; i < len(words); i++ {
			g := strings.Join(words[:i], " ")
			if id, ok := seenCmd[g]; ok {
				return nil, fmt.Errorf("command %q (%s) is also a group", g, id)
			}
			if !groupSeen[g] {
				groupSeen[g] = true
				groupPaths = append(groupPaths, g)
			}
		}
		code, err := cliSpec(op, words)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.ID, err)
		}
		leaves = append(leaves, leaf{group: strings.Join(words[:len(words)-1], " "), code: code})
	}
	for g := range groupSeen {
		if _, ok := seenCmd[g]; ok {
			return nil, fmt.Errorf("group %q is also a command", g)
		}
	}
	sort.Strings(groupPaths)
	for _, g := range groupPaths {
		words := strings.Fields(g)
		last := words[len(words)-1]
		short := groupShort[last]
		if short == "" {
			return nil, fmt.Errorf("group %q has no description in internal/tools/gen/cli.go", last)
		}
		parent := "root"
		if len(words) > 1 {
			parent = fmt.Sprintf("groups[%q]", strings.Join(words[:len(words)-1], " "))
		}
		fmt.Fprintf(&b, "\tgroups[%q] = &cobra.Command{Use: %q, Short: %q, GroupID: cmdutil.GroupIDFor(%q)}\n", g, last, short, g)
		fmt.Fprintf(&b, "\t%s.AddCommand(groups[%q])\n", parent, g)
	}
	for _, l := range leaves {
		parent := "root"
		if l.group != "" {
			parent = fmt.Sprintf("groups[%q]", l.group)
		}
		fmt.Fprintf(&b, "\t%s.AddCommand(cmdutil.NewCmdOperation(f, %s, runF))\n", parent, l.code)
	}
	b.WriteString("}\n")
	return gofmt(b.Bytes())
}

func cliSpec(op *operation, words []string) (string, error) {
	args, argIn, flags, err := cliInputs(op)
	if err != nil {
		return "", err
	}
	use, example := cliUsage(words, args, flags)
	var b strings.Builder
	fmt.Fprintf(&b, "&cmdutil.OperationSpec{\n")
	fmt.Fprintf(&b, "ID: %q, Method: %q, Path: %q,\n", op.ID, op.Method, op.Path)
	fmt.Fprintf(&b, "Use: %q, Short: %q,\n", use, op.Summary)
	if op.Description != "" {
		fmt.Fprintf(&b, "Long: %q,\n", op.Summary+"\n\n"+op.Description)
	}
	fmt.Fprintf(&b, "Example: %q,\n", "  "+example+"\n  "+example+" --json")
	fmt.Fprintf(&b, "Anonymous: %t, Idempotent: %t, HasBody: %t, BodyRequired: %t,\n", op.Anonymous, op.Idempotent, op.Body != nil, op.BodyRequired)
	if len(args) > 0 {
		b.WriteString("Args: []cmdutil.ArgSpec{")
		for _, a := range args {
			fmt.Fprintf(&b, "{Name: %q, In: %q}, ", a, argIn[a])
		}
		b.WriteString("},\n")
	}
	if len(flags) > 0 {
		b.WriteString("Flags: []cmdutil.FlagSpec{\n")
		for _, f := range flags {
			fmt.Fprintf(&b, "{Flag: %q, Field: %q, In: %q, Kind: %q, Required: %t, Usage: %q", f.Flag, f.Field, f.In, f.Kind, f.Required, f.Usage)
			if len(f.Enum) > 0 {
				fmt.Fprintf(&b, ", Enum: %#v", f.Enum)
			}
			b.WriteString("},\n")
		}
		b.WriteString("},\n")
	}
	if t := op.CLI.Table; t != nil {
		fmt.Fprintf(&b, "Table: &cmdutil.TableSpec{Path: %q, Columns: %#v},\n", t.Path, t.Columns)
	}
	b.WriteString("}")
	return b.String(), nil
}

// cliInputs splits an operation's parameters and body fields into
// positional arguments (path parameters and those x-cli.args names), with
// where each goes, and flags, refusing a flag that clashes with a global
// one or another flag.
func cliInputs(op *operation) ([]string, map[string]string, []cliFlag, error) {
	var flags []cliFlag
	var args []string
	argIn := map[string]string{}
	positional := map[string]bool{}
	for _, a := range op.CLI.Args {
		positional[a] = true
	}
	used := map[string]string{}
	addFlag := func(f cliFlag) error {
		if globalFlags[f.Flag] {
			return fmt.Errorf("flag --%s for %s clashes with a global flag", f.Flag, f.Field)
		}
		if prev, ok := used[f.Flag]; ok {
			return fmt.Errorf("flag --%s for %s collides with %s", f.Flag, f.Field, prev)
		}
		used[f.Flag] = f.Field
		flags = append(flags, f)
		return nil
	}
	for _, p := range op.Params {
		if p.In == "path" || positional[p.Name] {
			args = append(args, p.Name)
			argIn[p.Name] = p.In
			continue
		}
		if err := addFlag(cliFlag{Flag: flagName(p.Name), Field: p.Name, In: p.In, Kind: flagKind(p.Schema),
			Usage: firstSentence(p.Description), Required: p.Required, Enum: enumOf(p.Schema)}); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, f := range op.BodyFields {
		if positional[f.Name] {
			args = append(args, f.Name)
			argIn[f.Name] = "body"
			continue
		}
		if err := addFlag(cliFlag{Flag: flagName(f.Name), Field: f.Name, In: "body", Kind: flagKind(f.Schema),
			Usage: firstSentence(f.Description), Required: f.Required, Enum: enumOf(f.Schema)}); err != nil {
			return nil, nil, nil, err
		}
	}
	for a := range positional {
		if _, ok := argIn[a]; !ok {
			return nil, nil, nil, fmt.Errorf("x-cli.args names %q, which is neither a parameter nor a body field", a)
		}
	}
	return args, argIn, flags, nil
}

// cliUsage is a command's use line and its example, which passes every
// argument and required flag.
func cliUsage(words, args []string, flags []cliFlag) (use, example string) {
	use = words[len(words)-1]
	example = "pier " + strings.Join(words, " ")
	for _, a := range args {
		use += " <" + kebab(a) + ">"
		example += " " + exampleValue(a)
	}
	for _, f := range flags {
		if f.Required {
			example += fmt.Sprintf(" --%s %s", f.Flag, exampleValue(f.Field))
		}
	}
	return use, example
}

// flagName is a parameter's or body field's flag: its name in kebab-case,
// except projectId, which is --project on every command (the CLI keeps
// --project-id as a hidden alias and reads PIER_PROJECT).
func flagName(field string) string {
	if field == "projectId" {
		return "project"
	}
	return kebab(field)
}

func enumOf(s map[string]any) []string {
	var out []string
	for _, e := range list(s["enum"]) {
		if v, ok := e.(string); ok {
			out = append(out, v)
		}
	}
	return out
}

func firstSentence(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func exampleValue(name string) string {
	switch name {
	case "q":
		return "acme"
	case "id":
		return "ID"
	case "workload":
		return "static_site"
	case "domain":
		return "acme.dev"
	}
	return strings.ToUpper(kebab(name))
}
