package sdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/internal/lib/version"
	"github.com/pierhq/pier/sdk/rawapi"
)

// RequestEditorFn edits one request before it is sent, such as
// WithIdempotencyKey.
type RequestEditorFn = rawapi.RequestEditorFn

// Version is sent in the User-Agent header.
const Version = version.Version

// Client calls Pier's API. It is safe for concurrent use.
type Client struct {
	baseURL    string
	apiKey     string
	http       *http.Client
	maxRetries int
	minBackoff time.Duration
	maxBackoff time.Duration
	userAgent  string
	api        *rawapi.ClientWithResponses
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends `Authorization: Bearer KEY` on every request.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient replaces http.DefaultClient.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithMaxRetries sets how many times a retryable failure is retried (default 3).
func WithMaxRetries(n int) Option { return func(c *Client) { c.maxRetries = n } }

// WithBackoff sets the first and the largest wait between retries.
func WithBackoff(min, max time.Duration) Option {
	return func(c *Client) { c.minBackoff, c.maxBackoff = min, max }
}

// WithUserAgent prefixes the User-Agent header, such as "pier-cli/0.1".
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithIdempotencyKey sets the Idempotency-Key of one call. Without it the
// client generates a key for every write that declares one, and keeps it
// across that call's retries.
func WithIdempotencyKey(key string) RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Idempotency-Key", key)
		return nil
	}
}

// NewClient returns a client for the API at baseURL, such as
// "http://localhost:8080".
func NewClient(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("sdk: base URL %q must be absolute, such as http://localhost:8080", baseURL)
	}
	c := &Client{
		baseURL:    strings.TrimRight(baseURL, "/"),
		http:       defaultHTTPClient(),
		maxRetries: 3,
		minBackoff: 200 * time.Millisecond,
		maxBackoff: 10 * time.Second,
	}
	for _, o := range opts {
		o(c)
	}
	api, err := rawapi.NewClientWithResponses(c.baseURL, rawapi.WithHTTPClient(c))
	if err != nil {
		return nil, err
	}
	c.api = api
	return c, nil
}

// defaultHTTPClient is http.DefaultClient's transport keeping more idle
// connections per host: a digest upload sends files in parallel, and with
// the standard two, the other connections would be closed and dialled
// again for every file.
var defaultHTTPClient = sync.OnceValue(func() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultClient
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: t}
})

// BaseURL returns the API's base URL.
func (c *Client) BaseURL() string { return c.baseURL }

// API returns the generated low-level client, which shares this client's
// authentication, retries and idempotency.
func (c *Client) API() *rawapi.ClientWithResponses { return c.api }

// Response is a raw API response.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Replayed reports whether the server answered with a stored replay.
func (r *Response) Replayed() bool { return r.Header.Get("Idempotency-Replayed") == "true" }

// Call sends one request with this client's authentication, retries and
// idempotency, and returns the raw response. A non-2xx answer is returned as
// an *Error. The CLI uses it; agents normally use the typed methods.
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) (*Response, error) {
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b := readAll(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, errorFromResponse(resp, b)
	}
	return &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Do implements HttpRequestDoer for the generated client: it adds
// credentials and the Idempotency-Key, and retries what can be retried.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	if c.apiKey != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	ua := "pier-sdk-go/" + Version
	if c.userAgent != "" {
		ua = c.userAgent + " " + ua
	}
	req.Header.Set("User-Agent", ua)
	op, known := MatchOperation(req.Method, req.URL.Path)
	if known && op.Idempotent && req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", newIdempotencyKey())
	}
	if req.Header.Get("Accept") == "" {
		// Every answer is JSON except the two scripts the sandbox publishes.
		req.Header.Set("Accept", "application/json, text/javascript;q=0.5")
	}

	// A request is safe to resend after an unknown outcome when it cannot act
	// twice: a read (a POST that only asks included, such as
	// find_missing_blobs, which a connection the server closed while it sat
	// idle would otherwise fail), a PUT (which sets a state, such as content
	// under its hash), or a write whose Idempotency-Key makes the server
	// replay.
	safe := req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodPut ||
		known && op.ReadOnly || req.Header.Get("Idempotency-Key") != ""

	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			r = req.Clone(req.Context())
			if req.Body != nil && req.Body != http.NoBody {
				if req.GetBody == nil {
					return nil, errors.New("sdk: cannot retry a request whose body cannot be replayed")
				}
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := c.http.Do(r)
		wait, retry := c.shouldRetry(resp, err, safe)
		if !retry || attempt >= c.maxRetries {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
		if wait == 0 {
			wait = c.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
	}
}

// shouldRetry decides whether to retry and how long the server asked to wait.
func (c *Client) shouldRetry(resp *http.Response, err error, safe bool) (time.Duration, bool) {
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return 0, false
		}
		return 0, safe
	}
	var wait time.Duration
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			wait = min(time.Duration(n)*time.Second, c.maxBackoff)
		}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusServiceUnavailable:
		return wait, true
	case resp.StatusCode == http.StatusConflict:
		// Only "still in flight" is worth waiting for; other conflicts are final.
		b := readAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		var env struct {
			BlockedBy string `json:"blockedBy"`
		}
		json.Unmarshal(b, &env)
		return wait, env.BlockedBy == "idempotency:in_flight"
	case resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented:
		return wait, safe
	}
	return 0, false
}

// backoff is exponential with full jitter.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.minBackoff << attempt
	if d <= 0 || d > c.maxBackoff {
		d = c.maxBackoff
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}

func newIdempotencyKey() string {
	var b [16]byte
	if _, err := cryptoRead(b[:]); err != nil {
		panic(err)
	}
	return "idk_" + hex.EncodeToString(b[:])
}

var cryptoRead = rand.Read
