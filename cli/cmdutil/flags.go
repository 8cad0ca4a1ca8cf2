package cmdutil

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/pierhq/pier/sdk"
)

var envNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
})

// ParseAssignments reads NAME=VALUE flags (--env, --secret, a
// variables flag); NAME alone takes the value of
// that variable in the caller's environment, so a secret need not be
// typed on the command line. nil when there are none.
func ParseAssignments(flag string, list []string, getenv func(string) string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range list {
		name, value, ok := strings.Cut(kv, "=")
		if !envNameRE().MatchString(name) {
			return nil, fmt.Errorf("%s %q: the name must be letters, digits and underscores, not starting with a digit (NAME=VALUE)", flag, kv)
		}
		if !ok {
			value = getenv(name)
			if value == "" {
				return nil, fmt.Errorf("%s %s: %s is not set in your environment; pass %s=VALUE", flag, name, name, name)
			}
		}
		out[name] = value
	}
	return out, nil
}

// OnlyProject picks the organisation's project when it has exactly one,
// for commands whose --project may be left out.
func OnlyProject(ctx context.Context, f *Factory) (string, error) {
	c, err := f.Client()
	if err != nil {
		return "", err
	}
	two := 2 // enough to tell one project from several
	l, err := c.ListProjects(ctx, &sdk.ListProjectsParams{Limit: &two})
	if err != nil {
		return "", err
	}
	switch ps := l.Data.Projects; len(ps) {
	case 1:
		return ps[0].Id, nil
	case 0:
		return "", UsageErrorf("pier launch", "the organisation has no project; a human creates one (pier admin create-project locally)")
	default:
		ids := make([]string, len(ps))
		for i, p := range ps {
			ids[i] = p.Id + " (" + p.Name + ")"
		}
		return "", UsageErrorf("pier launch", "choose a project with --project: %s", strings.Join(ids, ", "))
	}
}
