package cmdutil

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// withFlagSuggestion adds "Did you mean --name?" to an unknown flag error
// when one of the command's flags is a typo away, as cobra does for
// commands but not for flags.
func withFlagSuggestion(c *cobra.Command, err error) error {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok || typed == "" {
		return err
	}
	typed, _, _ = strings.Cut(typed, "=")
	best, bestDist := "", 3 // at most two edits, as cobra's command suggestions
	c.Flags().VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden || fl.Deprecated != "" {
			return
		}
		if d := editDistance(typed, fl.Name); d < bestDist {
			best, bestDist = fl.Name, d
		}
	})
	if best == "" {
		return err
	}
	return fmt.Errorf("%w\n\nDid you mean this?\n\t--%s", err, best)
}

// editDistance is the Levenshtein distance of a and b, by bytes (flag
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
