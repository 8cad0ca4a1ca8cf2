package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// smtpLoad is the SMTP phase: legitimate mail from 127.0.0.0/24 (small
// messages five a second, one of 1 MiB every five seconds) while hostile
// networks, each a /24 of their own, flood sessions past the per-network
// cap, harvest addresses with unknown recipients, and send messages past
// the size limit. Legitimate mail must be accepted every time; a hostile
// session must be refused or cut off as the limits say.
type smtpLoad struct {
	addr, rcpt string
	report     func(op string, err error)

	legit, legitBig        atomic.Int64
	refused, harvestCut    atomic.Int64
	largeRefused, harvests atomic.Int64
}

func (l *smtpLoad) run(ctx context.Context) {
	var wg sync.WaitGroup
	loop := func(every time.Duration, fn func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for ctx.Err() == nil {
				fn(ctx)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}()
	}
	small := []byte("From: partner@example.org\r\nTo: " + l.rcpt + "\r\nSubject: order\r\n\r\n" + strings.Repeat("An order line of a legitimate message.\r\n", 40))
	big := bigBody(l.rcpt, 1<<20)
	oversize := bigBody(l.rcpt, 12<<20)
	// Legitimate mail: two senders of small messages, one of big ones.
	for i := range 2 {
		loop(400*time.Millisecond, func(ctx context.Context) {
			l.report("smtp_legit", l.legitSend(ctx, fmt.Sprintf("127.0.0.%d", 10+i), small, &l.legit))
		})
	}
	loop(5*time.Second, func(ctx context.Context) {
		l.report("smtp_legit", l.legitSend(ctx, "127.0.0.20", big, &l.legitBig))
	})
	// Session floods: 4 networks, 16 sessions each against a cap of 10,
	// each held two seconds.
	for n := range 4 {
		for i := range 16 {
			loop(100*time.Millisecond, func(ctx context.Context) {
				l.report("smtp_flood", l.hold(ctx, fmt.Sprintf("127.0.%d.%d", 40+n, 1+i), 2*time.Second))
			})
		}
	}
	// Harvesting: 4 sessions at a time from one network, 2,000 guesses each.
	for i := range 4 {
		loop(200*time.Millisecond, func(ctx context.Context) {
			l.report("smtp_harvest", l.harvest(ctx, fmt.Sprintf("127.0.50.%d", 1+i)))
		})
	}
	// Messages past the size limit: 3 at a time, from one network.
	for i := range 3 {
		loop(time.Second, func(ctx context.Context) {
			l.report("smtp_large", l.large(ctx, fmt.Sprintf("127.0.60.%d", 1+i), oversize))
		})
	}
	wg.Wait()
}

func bigBody(rcpt string, size int) []byte {
	var b strings.Builder
	b.WriteString("From: partner@example.org\r\nTo: " + rcpt + "\r\nSubject: a large attachment\r\n\r\n")
	line := strings.Repeat("z", 76) + "\r\n"
	for b.Len() < size {
		b.WriteString(line)
	}
	return []byte(b.String())
}

// dial opens a session from src; a refusal at the greeting comes back as
// the error.
func (l *smtpLoad) dial(ctx context.Context, src string) (*smtp.Client, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(time.Minute))
	c := smtp.NewClient(nc)
	if err := c.Hello("soak.test"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func smtpCode(err error) int {
	var e *smtp.SMTPError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func (l *smtpLoad) legitSend(ctx context.Context, src string, msg []byte, n *atomic.Int64) error {
	c, err := l.dial(ctx, src)
	if err != nil {
		return fmt.Errorf("legitimate session: %w", err)
	}
	defer c.Close()
	if err := c.Mail("partner@example.org", nil); err != nil {
		return fmt.Errorf("legitimate MAIL: %w", err)
	}
	if err := c.Rcpt(l.rcpt, nil); err != nil {
		return fmt.Errorf("legitimate RCPT: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("legitimate DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("legitimate message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("legitimate message: %w", err)
	}
	n.Add(1)
	return c.Quit()
}

// admitted dials as src; a session the server refuses with 421 counts as
// refused and gives neither a client nor an error.
func (l *smtpLoad) admitted(ctx context.Context, src string) (*smtp.Client, error) {
	c, err := l.dial(ctx, src)
	if smtpCode(err) == 421 {
		l.refused.Add(1)
		return nil, nil
	}
	return c, err
}

func (l *smtpLoad) hold(ctx context.Context, src string, d time.Duration) error {
	c, err := l.admitted(ctx, src)
	if c == nil {
		return err
	}
	defer c.Close()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return nil
}

func (l *smtpLoad) harvest(ctx context.Context, src string) error {
	c, err := l.admitted(ctx, src)
	if c == nil {
		return err
	}
	defer c.Close()
	l.harvests.Add(1)
	if err := c.Mail("harvester@example.net", nil); smtpCode(err) == 421 {
		l.harvestCut.Add(1)
		return nil
	} else if err != nil {
		return err
	}
	for i := range 2000 {
		err := c.Rcpt(fmt.Sprintf("guess%d-%d@%s", time.Now().UnixNano(), i, l.rcpt[strings.IndexByte(l.rcpt, '@')+1:]), nil)
		switch smtpCode(err) {
		case 550:
			if i >= 10 {
				return fmt.Errorf("%d unknown recipients in one session", i+1)
			}
		case 421:
			l.harvestCut.Add(1)
			return nil
		default:
			return fmt.Errorf("guess %d: %v", i+1, err)
		}
	}
	return errors.New("2,000 unknown recipients in one session")
}

func (l *smtpLoad) large(ctx context.Context, src string, msg []byte) error {
	c, err := l.admitted(ctx, src)
	if c == nil {
		return err
	}
	defer c.Close()
	if err := c.Mail("bulk@example.net", nil); smtpCode(err) == 421 {
		return nil
	} else if err != nil {
		return err
	}
	if err := c.Rcpt(l.rcpt, nil); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	w.Write(msg)
	if err := w.Close(); smtpCode(err) == 552 || smtpCode(err) == 421 {
		l.largeRefused.Add(1)
		return nil
	} else if err != nil {
		return err
	}
	return fmt.Errorf("a message of %d MiB accepted past the size limit", len(msg)>>20)
}

func (l *smtpLoad) summary() string {
	return fmt.Sprintf("smtp: legitimate messages accepted %d small + %d of 1 MiB; flood sessions refused %d; harvesting sessions %d, cut off %d; oversized messages refused %d",
		l.legit.Load(), l.legitBig.Load(), l.refused.Load(), l.harvests.Load(), l.harvestCut.Load(), l.largeRefused.Load())
}
