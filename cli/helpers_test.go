package cli

import (
	"bytes"
	"testing"
)

type testStreams struct {
	in       *bytes.Buffer
	out, err *bytes.Buffer
}

// newTestFactory returns a Factory over buffers and the given environment.
func newTestFactory(env map[string]string) (*Factory, *testStreams) {
	ts := &testStreams{in: &bytes.Buffer{}, out: &bytes.Buffer{}, err: &bytes.Buffer{}}
	f := NewFactory(&IOStreams{In: ts.in, Out: ts.out, ErrOut: ts.err})
	f.Getenv = func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "PIER_CACHE_DIR" {
			return "off" // tests that use the digest cache name their own
		}
		return ""
	}
	return f, ts
}

// runCaptured executes args with every operation's API call replaced by a
// capture of its options. It returns the options (nil when no operation
// ran), the exit code and the streams.
func runCaptured(t *testing.T, stdin string, args ...string) (*OperationOptions, int, *testStreams) {
	t.Helper()
	f, ts := newTestFactory(nil)
	ts.in.WriteString(stdin)
	var got *OperationOptions
	root := newRootCmd(f, func(o *OperationOptions) error {
		got = o
		return nil
	})
	code := execute(f, root, args)
	return got, code, ts
}
