package smtpd

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/emersion/go-smtp"
)

// Relay sends outbound mail through a smarthost, smtp://HOST:PORT.
type Relay struct {
	addr     string
	hostname string
}

// NewRelay reads a relay URL.
func NewRelay(rawURL, hostname string) (*Relay, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "smtp" || u.Host == "" {
		return nil, fmt.Errorf("the SMTP relay must be smtp://HOST:PORT, not %q", rawURL)
	}
	host := u.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "25")
	}
	return &Relay{addr: host, hostname: hostname}, nil
}

// Name is the relay's address.
func (r *Relay) Name() string { return "smtp://" + r.addr }

// Send hands one message to the relay.
func (r *Relay) Send(ctx context.Context, from string, to []string, msg []byte) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(time.Minute))
	}
	c := smtp.NewClient(conn)
	defer c.Close()
	if err := c.Hello(r.hostname); err != nil {
		return err
	}
	if err := c.Mail(from, nil); err != nil {
		return err
	}
	for _, t := range to {
		if err := c.Rcpt(t, nil); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
