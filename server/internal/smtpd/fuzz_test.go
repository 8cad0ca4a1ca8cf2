package smtpd

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// noDNS answers every question with a failure, at once.
type noDNS struct{}

var errNoDNS = errors.New("no DNS in this test")

func (noDNS) LookupTXT(context.Context, string) ([]string, error)        { return nil, errNoDNS }
func (noDNS) LookupMX(context.Context, string) ([]*net.MX, error)        { return nil, errNoDNS }
func (noDNS) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) { return nil, errNoDNS }
func (noDNS) LookupAddr(context.Context, string) ([]string, error)       { return nil, errNoDNS }

// FuzzParse feeds hostile messages to the parser and the authentication
// checks: whatever arrives, parsing ends without a panic, and what it keeps
// is bounded by the message.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"From: a@b.example\r\nSubject: hi\r\n\r\nbody\r\n",
		"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nhello\r\n--x\r\nContent-Disposition: attachment; filename=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--x--\r\n",
		"DKIM-Signature: v=1; a=ed25519-sha256; d=x.example; s=s; h=from; bh=; b=\r\nFrom: x@x.example\r\n\r\n.\r\n",
		"Content-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=E9t=E9\r\n",
	} {
		f.Add([]byte(seed))
	}
	s := New(Config{Resolver: noDNS{}, MaxMessageBytes: 1 << 20})
	peer := netip.MustParseAddr("192.0.2.1")
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := s.parse("sender@example.org", "helo.example", peer, raw)
		if err != nil {
			return
		}
		if len(d.Text)+len(d.HTML) > len(raw)*4+64 {
			t.Fatalf("parts of %d bytes from a %d-byte message", len(d.Text)+len(d.HTML), len(raw))
		}
	})
}
