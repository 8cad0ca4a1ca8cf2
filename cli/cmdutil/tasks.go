package cmdutil

import "github.com/pierhq/pier/sdk"

// ResultInt reads a number from a task's result; 0 when absent.
func ResultInt(t sdk.TaskHandle, key string) int {
	if t.Result == nil {
		return 0
	}
	if n, ok := (*t.Result)[key].(float64); ok {
		return int(n)
	}
	return 0
}
