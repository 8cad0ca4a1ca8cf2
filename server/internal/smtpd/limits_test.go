package smtpd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/pierhq/pier/internal/testkit/memtest"
	"github.com/pierhq/pier/server/internal/service"
)

// boxes is the domain as the listener sees it: addresses under known.test
// exist, each inbox has room bytes left, and Deliver waits on hold while
// it is open.
type boxes struct {
	room      atomic.Int64
	lookups   atomic.Int64
	delivered atomic.Int64
	inDeliver atomic.Int64
	hold      chan struct{}

	mu   sync.Mutex
	auth []string
}

func newBoxes(room int64) *boxes {
	b := &boxes{}
	b.room.Store(room)
	return b
}

func (b *boxes) Accepts(_ context.Context, rcpt string) (bool, error) {
	b.lookups.Add(1)
	return strings.HasSuffix(rcpt, "@known.test"), nil
}

func (b *boxes) Fits(_ context.Context, _ string, size int64) (bool, error) {
	return size <= b.room.Load(), nil
}

func (b *boxes) Deliver(_ context.Context, d service.Delivery) (string, error) {
	b.inDeliver.Add(1)
	defer b.inDeliver.Add(-1)
	if b.hold != nil {
		<-b.hold
	}
	if int64(len(d.Raw)) > b.room.Load() {
		return "", service.ErrInboxFull
	}
	b.delivered.Add(1)
	b.mu.Lock()
	b.auth = append(b.auth, d.Auth.SPF+"/"+d.Auth.DMARC)
	b.mu.Unlock()
	return "msg", nil
}

// countingListener counts the bytes the server reads from its peers.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// serve runs the listener on loopback; read counts what it reads.
func serve(t testing.TB, cfg Config) (s *Server, addr string, read *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Resolver == nil {
		cfg.Resolver = noDNS{}
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	read = new(atomic.Int64)
	s = New(cfg)
	go s.Serve(countingListener{ln, read})
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String(), read
}

// dialFrom opens an SMTP client from a loopback source address of the
// test's choosing and says hello; the error is the server's greeting when
// it refused the session.
func dialFrom(src, addr string) (*smtp.Client, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(time.Minute))
	c := smtp.NewClient(nc)
	if err := c.Hello("sender.test"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func code(err error) int {
	var e *smtp.SMTPError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// send sends one message over c.
func send(c *smtp.Client, from, to string, msg []byte) error {
	if err := c.Mail(from, nil); err != nil {
		return err
	}
	if err := c.Rcpt(to, nil); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	return w.Close()
}

// bigMessage is a plain-text message of about size bytes.
func bigMessage(size int) []byte {
	var b strings.Builder
	b.WriteString("From: sender@example.org\r\nTo: a@known.test\r\nSubject: big\r\n\r\n")
	line := strings.Repeat("x", 76) + "\r\n"
	for b.Len() < size {
		b.WriteString(line)
	}
	return []byte(b.String())
}

// Sessions are capped per /24 and in total: the one over either cap is
// told 421 at its greeting, and a closed session gives its place back.
func TestSMTPSessionsCapped(t *testing.T) {
	s, addr, _ := serve(t, Config{Mail: newBoxes(1 << 30), Sessions: 6, NetworkSessions: 3})
	var open []*smtp.Client
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for _, src := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		c, err := dialFrom(src, addr)
		if err != nil {
			t.Fatalf("session from %s: %v", src, err)
		}
		open = append(open, c)
	}
	if c, err := dialFrom("127.0.0.4", addr); code(err) != 421 {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a fourth session from 127.0.0.0/24: %v, want 421", err)
	}
	for _, src := range []string{"127.0.1.1", "127.0.1.2", "127.0.1.3"} {
		c, err := dialFrom(src, addr)
		if err != nil {
			t.Fatalf("session from %s: %v", src, err)
		}
		open = append(open, c)
	}
	if c, err := dialFrom("127.0.2.1", addr); code(err) != 421 {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a seventh session in all: %v, want 421", err)
	}
	if n := s.Sessions(); n != 6 {
		t.Fatalf("%d sessions open, want 6", n)
	}
	open[0].Quit()
	open = open[1:]
	deadline := time.Now().Add(5 * time.Second)
	for s.Sessions() > 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c, err := dialFrom("127.0.0.9", addr)
	if err != nil {
		t.Fatalf("a session after one closed: %v", err)
	}
	open = append(open, c)
}

// The message rate is one bucket per /24: 30 addresses of one network
// share it rather than getting 30 fresh allowances.
func TestSMTPRateKeyedByNetwork(t *testing.T) {
	_, addr, _ := serve(t, Config{Mail: newBoxes(1 << 30), PeerRate: 0.001, PeerBurst: 5, NetworkSessions: 50})
	accepted := 0
	for i := 2; i < 32; i++ {
		c, err := dialFrom(fmt.Sprintf("127.0.0.%d", i), addr)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Mail("sender@example.org", nil)
		switch code(err) {
		case 0:
			if err != nil {
				t.Fatal(err)
			}
			accepted++
		case 421:
		default:
			t.Fatalf("MAIL from 127.0.0.%d: %v", i, err)
		}
		c.Close()
	}
	if accepted != 5 {
		t.Fatalf("%d of 30 sources of one network were let send, want the burst of 5", accepted)
	}
}

// Directory harvesting: unknown recipients are hard errors, and the tenth
// ends the session with a 421, after ten lookups rather than 2,000.
func TestSMTPHarvestHangsUp(t *testing.T) {
	b := newBoxes(1 << 30)
	_, addr, _ := serve(t, Config{Mail: b})
	c, err := dialFrom("127.0.0.1", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("harvester@example.org", nil); err != nil {
		t.Fatal(err)
	}
	refused, closed := 0, false
	for i := range 2000 {
		err := c.Rcpt(fmt.Sprintf("guess%d@known.invalid", i), nil)
		if code(err) == 550 {
			refused++
			continue
		}
		if code(err) != 421 {
			t.Fatalf("RCPT %d: %v, want 550 then 421", i, err)
		}
		// The connection is closed after the 421.
		if err := c.Noop(); err == nil {
			t.Fatal("the session went on after 421")
		}
		closed = true
		break
	}
	if !closed || refused != 9 {
		t.Fatalf("refused %d recipients, closed %v; want 9 refusals, then 421 and a closed connection", refused, closed)
	}
	if n := b.lookups.Load(); n > 10 {
		t.Fatalf("%d lookups for one session's guesses, want at most 10", n)
	}
}

// A session that names more recipients than its limit, across as many
// transactions as it likes, is told 421 and cut off.
func TestSMTPRecipientLimitHangsUp(t *testing.T) {
	_, addr, _ := serve(t, Config{Mail: newBoxes(1 << 30), MaxRecipients: 5, SessionRecipients: 20, PeerRate: 1e6, PeerBurst: 1e6})
	c, err := dialFrom("127.0.0.1", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 100 {
		if i%5 == 0 {
			if err := c.Reset(); err != nil {
				t.Fatalf("RSET before RCPT %d: %v", i+1, err)
			}
			if err := c.Mail("sender@example.org", nil); err != nil {
				t.Fatalf("MAIL before RCPT %d: %v", i+1, err)
			}
		}
		err := c.Rcpt(fmt.Sprintf("a%d@known.test", i), nil)
		if i < 20 {
			if err != nil {
				t.Fatalf("RCPT %d: %v", i+1, err)
			}
			continue
		}
		if code(err) != 421 {
			t.Fatalf("RCPT %d: %v, want 421", i+1, err)
		}
		if err := c.Noop(); err == nil {
			t.Fatal("the session went on after 421")
		}
		return
	}
	t.Fatal("100 recipients in one session, none refused")
}

// A full inbox is refused at RCPT, before any data; a message larger than
// the room left is refused after it is spooled, without being parsed or
// handed to Deliver.
func TestSMTPQuotaBeforeParse(t *testing.T) {
	b := newBoxes(0)
	_, addr, _ := serve(t, Config{Mail: b})
	c, err := dialFrom("127.0.0.1", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("sender@example.org", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("a@known.test", nil); code(err) != 552 {
		t.Fatalf("RCPT to a full inbox: %v, want 552", err)
	}
	c.Reset()

	b.room.Store(1 << 20)
	if err := send(c, "sender@example.org", "a@known.test", bigMessage(2<<20)); code(err) != 552 {
		t.Fatalf("2 MiB into 1 MiB of room: %v, want 552", err)
	}
	if err := send(c, "sender@example.org", "a@known.test", bigMessage(100<<10)); err != nil {
		t.Fatalf("100 KiB into 1 MiB of room: %v", err)
	}
	if n := b.delivered.Load(); n != 1 {
		t.Fatalf("%d messages reached Deliver, want only the one that fits", n)
	}
}

// Floods of sessions, recipients and large messages leave the heap and
// the resident set where they were: sessions past the caps are refused,
// harvesting sessions end after a few lookups, and messages wait on disk,
// not in memory, for their turn to be parsed.
func TestSMTPFloodMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("sends about 500 MiB over loopback")
	}
	m := memoryBaseline{memtest.Heap(), memtest.RSS(t)}
	t.Run("large messages", func(t *testing.T) { floodLargeMessages(t, m) })
	t.Run("messages for a full inbox", func(t *testing.T) { floodFullInbox(t, m) })
	t.Run("sessions and recipients", func(t *testing.T) { floodHarvestingSessions(t, m) })
}

const mib = 1 << 20

// memoryBaseline is the heap and the resident set before a flood.
type memoryBaseline struct {
	heap uint64
	rss  int64
}

// within wants the heap and the resident set grown by at most the bounds
// since the baseline.
func (m memoryBaseline) within(t *testing.T, what string, heapBound uint64, rssBound int64) {
	t.Helper()
	heap, rss := memtest.Heap(), memtest.RSS(t)
	t.Logf("%s: heap %+.1f MiB, RSS %+.1f MiB", what, (float64(heap)-float64(m.heap))/mib, float64(rss-m.rss)/mib)
	if heap > m.heap+heapBound {
		t.Errorf("%s: the heap grew by %d MiB, bound %d MiB", what, (heap-m.heap)/mib, heapBound/mib)
	}
	if rss > m.rss+rssBound {
		t.Errorf("%s: the resident set grew by %d MiB, bound %d MiB", what, (rss-m.rss)/mib, rssBound/mib)
	}
}

func floodLargeMessages(t *testing.T, m memoryBaseline) {
	// 24 messages of 8 MiB at once, all for an inbox with room: while
	// Deliver is held, the server has read every byte of them.
	b := newBoxes(1 << 40)
	b.hold = make(chan struct{})
	_, addr, read := serve(t, Config{Mail: b, Sessions: 64, NetworkSessions: 64, PeerRate: 1e6, PeerBurst: 1e6})
	msg := bigMessage(8 * mib)
	const n = 24
	errs := make(chan error, n)
	for i := range n {
		go func() {
			c, err := dialFrom(fmt.Sprintf("127.0.3.%d", i+1), addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			errs <- send(c, "sender@example.org", "a@known.test", msg)
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for read.Load() < n*int64(len(msg)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if read.Load() < n*int64(len(msg)) {
		t.Fatalf("the server read %d MiB of %d in a minute", read.Load()/mib, n*len(msg)/mib)
	}
	m.within(t, "24 × 8 MiB messages in flight", 96*mib, 160*mib)
	close(b.hold)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a legitimate message: %v", err)
		}
	}
	if d := b.delivered.Load(); d != n {
		t.Errorf("%d of %d messages delivered", d, n)
	}
}

func floodFullInbox(t *testing.T, m memoryBaseline) {
	// 64 messages of 9 MiB for an inbox with 1 MiB of room: all are
	// refused, none is parsed, and the heap's peak stays low.
	b := newBoxes(mib)
	_, addr, _ := serve(t, Config{Mail: b, Sessions: 64, NetworkSessions: 64, PeerRate: 1e6, PeerBurst: 1e6})
	msg := bigMessage(9 * mib)
	stop := heapPeak()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialFrom(fmt.Sprintf("127.0.4.%d", i+1), addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if err := send(c, "sender@example.org", "a@known.test", msg); code(err) == 552 {
				refused.Add(1)
			} else {
				t.Errorf("a message for a full inbox: %v, want 552", err)
			}
		}()
	}
	wg.Wait()
	top := stop()
	t.Logf("heap peak %+.1f MiB", (float64(top)-float64(m.heap))/mib)
	if top > m.heap+96*mib {
		t.Errorf("the heap peaked %d MiB above where it started, bound 96 MiB", (top-m.heap)/mib)
	}
	if refused.Load() != 64 || b.delivered.Load() != 0 || b.inDeliver.Load() != 0 {
		t.Errorf("%d refused, %d delivered", refused.Load(), b.delivered.Load())
	}
	m.within(t, "64 × 9 MiB for a full inbox", 32*mib, 96*mib)
}

func floodHarvestingSessions(t *testing.T, m memoryBaseline) {
	// 400 connections from 40 networks, each trying 2,000 unknown
	// recipients: at most Sessions are open at once, each ends after
	// its tenth refusal.
	b := newBoxes(1 << 30)
	s, addr, _ := serve(t, Config{Mail: b, Sessions: 100, NetworkSessions: 5})
	var wg sync.WaitGroup
	var admitted, maxOpen atomic.Int64
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialFrom(fmt.Sprintf("127.0.%d.%d", 10+i%40, 1+i/40), addr)
			if err != nil {
				return
			}
			defer c.Close()
			admitted.Add(1)
			if n := int64(s.Sessions()); n > maxOpen.Load() {
				maxOpen.Store(n)
			}
			if err := c.Mail("harvester@example.org", nil); err != nil {
				return
			}
			for j := range 2000 {
				if err := c.Rcpt(fmt.Sprintf("guess%d@known.invalid", j), nil); code(err) != 550 {
					return
				}
			}
			t.Error("a session took 2,000 unknown recipients")
		}()
	}
	wg.Wait()
	if maxOpen.Load() > 100 {
		t.Errorf("%d sessions open at once, cap 100", maxOpen.Load())
	}
	if lookups := b.lookups.Load(); lookups > 10*admitted.Load() {
		t.Errorf("%d lookups for %d sessions", lookups, admitted.Load())
	}
	t.Logf("%d of 400 sessions admitted, %d lookups", admitted.Load(), b.lookups.Load())
	m.within(t, "400 harvesting sessions", 16*mib, 64*mib)
}

// heapPeak samples the heap's size (live and not yet collected) every
// few milliseconds until stop, which returns the largest seen.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(finished)
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}
