package cmdutil

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/pierhq/pier/sdk"
	"github.com/spf13/cobra"
)

// DefaultBaseURL is the API address used when neither --base-url nor
// PIER_BASE_URL is set.
const DefaultBaseURL = "http://localhost:8080"

// IOStreams are the streams a command reads and writes. Progress and
// prompts go to ErrOut, never to Out.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	// StdinIsTerminal, StdoutIsTerminal and StderrIsTerminal report whether
	// the stream is an interactive terminal; nil means it is not.
	StdinIsTerminal  func() bool
	StdoutIsTerminal func() bool
	StderrIsTerminal func() bool
}

// SystemIOStreams returns the process's standard streams.
func SystemIOStreams() *IOStreams {
	tty := func(f *os.File) func() bool {
		return func() bool { return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()) }
	}
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		StdinIsTerminal: tty(os.Stdin), StdoutIsTerminal: tty(os.Stdout), StderrIsTerminal: tty(os.Stderr),
	}
}

// CanPrompt reports whether the CLI may ask the user a question: only when
// stdin and stderr are terminals.
func (s *IOStreams) CanPrompt() bool {
	return IsTerminal(s.StdinIsTerminal) && IsTerminal(s.StderrIsTerminal)
}

// IsTerminal reports whether a stream's terminal test (such as
// IOStreams.StderrIsTerminal) says it is one; nil means it is not.
func IsTerminal(f func() bool) bool { return f != nil && f() }

// Config is the resolved global configuration. The root command's
// persistent flags bind to it.
type Config struct {
	BaseURL string        // --base-url, then PIER_BASE_URL, then DefaultBaseURL
	APIKey  string        // --api-key, then PIER_API_KEY
	JSON    bool          // --json: print envelopes as received
	Yes     bool          // --yes: confirm without asking
	NoWait  bool          // --no-wait: return a task handle instead of waiting
	Timeout time.Duration // --timeout: limit on one command's API calls; 0 means none
}

// Factory supplies a command's dependencies lazily: streams, configuration
// and the API client. It holds no package-level state; each run builds one.
type Factory struct {
	IO     *IOStreams
	Config Config

	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// HTTPClient replaces http.DefaultClient when set (tests).
	HTTPClient *http.Client
	// SDKOptions are added to every client (tests use them to shorten
	// retries).
	SDKOptions []sdk.Option

	mu      sync.Mutex
	clients map[bool]*sdk.Client
	specs   map[*cobra.Command]*OperationSpec
}

func (f *Factory) registerSpec(cmd *cobra.Command, spec *OperationSpec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.specs == nil {
		f.specs = map[*cobra.Command]*OperationSpec{}
	}
	f.specs[cmd] = spec
}

func (f *Factory) specFor(cmd *cobra.Command) *OperationSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.specs[cmd]
}

// NewFactory returns a Factory over the given streams.
func NewFactory(io *IOStreams) *Factory {
	return &Factory{IO: io}
}

// Env reads the environment variable k through Getenv.
func (f *Factory) Env(k string) string {
	if f.Getenv != nil {
		return f.Getenv(k)
	}
	return os.Getenv(k)
}

// BaseURL resolves the API address.
func (f *Factory) BaseURL() string {
	if f.Config.BaseURL != "" {
		return f.Config.BaseURL
	}
	if v := strings.TrimSpace(f.Env("PIER_BASE_URL")); v != "" {
		return v
	}
	return DefaultBaseURL
}

// APIKey resolves the API key; "" means none.
func (f *Factory) APIKey() string {
	if f.Config.APIKey != "" {
		return f.Config.APIKey
	}
	return strings.TrimSpace(f.Env("PIER_API_KEY"))
}

// Client returns the API client, authenticated with the resolved API key
// when there is one. It is built on first use.
func (f *Factory) Client() (*sdk.Client, error) { return f.client(true) }

// AnonymousClient returns a client that never sends an API key, for
// anonymous and holder-authority operations, which refuse agent
// credentials.
func (f *Factory) AnonymousClient() (*sdk.Client, error) { return f.client(false) }

func (f *Factory) client(withKey bool) (*sdk.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.clients[withKey]; ok {
		return c, nil
	}
	opts := []sdk.Option{sdk.WithUserAgent("pier-cli/" + sdk.Version)}
	if withKey {
		if k := f.APIKey(); k != "" {
			opts = append(opts, sdk.WithAPIKey(k))
		}
	}
	if f.HTTPClient != nil {
		opts = append(opts, sdk.WithHTTPClient(f.HTTPClient))
	}
	opts = append(opts, f.SDKOptions...)
	c, err := sdk.NewClient(f.BaseURL(), opts...)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	if f.clients == nil {
		f.clients = map[bool]*sdk.Client{}
	}
	f.clients[withKey] = c
	return c, nil
}

// Context applies --timeout to a command's calls.
func (f *Factory) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.Config.Timeout > 0 {
		return context.WithTimeout(ctx, f.Config.Timeout)
	}
	return context.WithCancel(ctx)
}
