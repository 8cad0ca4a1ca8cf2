package dnsserver_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/store"
)

// The zone of a launched domain with mail set up, as Pier publishes it:
// zone.BuildZone (SOA, NS with in-zone glue, A and AAAA at the apex and www,
// CAA) plus the records setup_email adds (MX to mail.<domain> with its
// addresses, SPF, DMARC, DKIM), in the order the service stores them.
const nsdDomain, nsdSerial = "acme.dev", 1767225600

func nsdZone() []dnsserver.Record {
	recs := dnsserver.BuildZone(nsdDomain, dnsserver.ZoneConfig{
		EdgeIPv4: net.ParseIP("192.0.2.10"), EdgeIPv6: net.ParseIP("2001:db8::10"), CAAIssuers: []string{"letsencrypt.org", "pier.local"}})
	return append(recs,
		dnsserver.Record{Name: "@", Type: "MX", TTL: 300, Value: "10 mail." + nsdDomain + "."},
		dnsserver.Record{Name: "@", Type: "TXT", TTL: 300, Value: `"v=spf1 mx -all"`},
		dnsserver.Record{Name: "_dmarc", Type: "TXT", TTL: 300, Value: `"v=DMARC1; p=quarantine; adkim=s; aspf=s"`},
		dnsserver.Record{Name: "pier._domainkey", Type: "TXT", TTL: 300, Value: `"v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="`},
		dnsserver.Record{Name: "mail", Type: "A", TTL: 300, Value: "192.0.2.10"},
		dnsserver.Record{Name: "mail", Type: "AAAA", TTL: 300, Value: "2001:db8::10"},
		// Not from a launch: an RRset too large for 512 bytes, for truncation.
		dnsserver.Record{Name: "big", Type: "TXT", TTL: 300, Value: `"` + strings.Repeat("a", 250) + `"`},
		dnsserver.Record{Name: "big", Type: "TXT", TTL: 300, Value: `"` + strings.Repeat("b", 250) + `"`},
		dnsserver.Record{Name: "big", Type: "TXT", TTL: 300, Value: `"` + strings.Repeat("c", 250) + `"`},
	)
}

// TestAnswersMatchNSD sends the same queries, byte for byte, to Pier and to
// NSD serving the same zone from Pier's master file, over UDP and TCP, over
// IPv4 and (where the machine has ::1) IPv6, with and without EDNS, and
// compares the answers field by field: header flags and rcode, every record
// of every section (owner, TTL, class, type, rdata, in order), the OPT
// record, and the length on the wire, which shows name compression. The
// differences Pier keeps on purpose are in nsdExceptions, each with its
// reason.
func TestAnswersMatchNSD(t *testing.T) {
	hosts := []string{"127.0.0.1"}
	if pc, err := net.ListenPacket("udp6", "[::1]:0"); err == nil {
		pc.Close()
		hosts = append(hosts, "::1")
	}
	nsdPort := startNSD(t, hosts, nsdDomain, nsdSerial, nsdZone())
	pierAddrs := servePier(t, hosts, nsdDomain, nsdSerial, nsdZone())

	used := make([]int, len(nsdExceptions))
	compared := 0
	for hi, host := range hosts {
		nsdAddr := net.JoinHostPort(host, fmt.Sprint(nsdPort))
		for _, netw := range []string{"udp", "tcp"} {
			for _, e := range nsdEDNS {
				for i, q := range nsdQuestions {
					// Each query twice: the first answer made, the second
					// the packed one.
					for _, f := range []queryFlags{{}, {rd: true}, {rd: true, cd: true, ad: true}, {}} {
						wire := nsdQuery(t, uint16(1000+i), q, e, f)
						label := fmt.Sprintf("%s %s %s %s %s %s %+v", host, netw, e.name, q.name, dns.ClassToString[q.class], dns.TypeToString[q.qtype], f)
						nsdRaw, nerr := exchangeRaw(netw, nsdAddr, wire)
						pierRaw, perr := exchangeRaw(netw, pierAddrs[hi], wire)
						if nerr != nil || perr != nil {
							t.Errorf("%s: pier %v, nsd %v", label, perr, nerr)
							continue
						}
						compared++
					diffs:
						for _, d := range compareAnswers(pierRaw, nsdRaw) {
							for x, exc := range nsdExceptions {
								if exc.match(netw, q, d) {
									used[x]++
									continue diffs
								}
							}
							t.Errorf("%s: %s: pier %s, nsd %s", label, d.field, d.pier, d.nsd)
						}
					}
				}
			}
		}
	}
	for x, exc := range nsdExceptions {
		if used[x] == 0 {
			t.Errorf("exception never needed, remove it: %s", exc.why)
		}
	}
	t.Logf("%d answers compared over %v", compared, hosts)
}

// nsdQuestions are asked of NSD and of Pier, each in every way below.
var nsdQuestions = []nsdQuestion{
	{"acme.dev.", dns.TypeSOA, dns.ClassINET},
	{"acme.dev.", dns.TypeNS, dns.ClassINET},
	{"acme.dev.", dns.TypeA, dns.ClassINET},
	{"acme.dev.", dns.TypeAAAA, dns.ClassINET},
	{"acme.dev.", dns.TypeCAA, dns.ClassINET},
	{"acme.dev.", dns.TypeMX, dns.ClassINET},
	{"acme.dev.", dns.TypeTXT, dns.ClassINET},
	{"acme.dev.", dns.TypeANY, dns.ClassINET},
	{"acme.dev.", dns.TypeAXFR, dns.ClassINET},
	{"www.acme.dev.", dns.TypeA, dns.ClassINET},
	{"www.acme.dev.", dns.TypeAAAA, dns.ClassINET},
	{"www.acme.dev.", dns.TypeMX, dns.ClassINET}, // NODATA
	{"WwW.AcMe.DeV.", dns.TypeA, dns.ClassINET},  // 0x20 mixed case
	{"ns1.acme.dev.", dns.TypeA, dns.ClassINET},  // glue as an answer
	{"mail.acme.dev.", dns.TypeAAAA, dns.ClassINET},
	{"_dmarc.acme.dev.", dns.TypeTXT, dns.ClassINET},
	{"pier._domainkey.acme.dev.", dns.TypeTXT, dns.ClassINET},
	{"_domainkey.acme.dev.", dns.TypeTXT, dns.ClassINET}, // empty non-terminal
	{"nope.acme.dev.", dns.TypeA, dns.ClassINET},         // NXDOMAIN
	{"a.b.www.acme.dev.", dns.TypeA, dns.ClassINET},      // NXDOMAIN below a name
	{"other.example.", dns.TypeA, dns.ClassINET},         // outside the zone
	{"acme.dev.", dns.TypeTXT, dns.ClassCHAOS},           // another class
	{"acme.dev.", dns.TypeA, dns.ClassANY},
	{"version.bind.", dns.TypeTXT, dns.ClassCHAOS}, // the version and identity queries
	{"id.server.", dns.TypeTXT, dns.ClassCHAOS},
	{"big.acme.dev.", dns.TypeTXT, dns.ClassINET}, // truncated over UDP below 1232 bytes
}

// ednsVariant is how a query carries EDNS, if at all.
type ednsVariant struct {
	name    string
	size    uint16 // 0: no OPT record
	do      bool
	version uint8
	option  dns.EDNS0
}

// nsdEDNS are the ways each question is asked.
var nsdEDNS = []ednsVariant{{name: "no EDNS"}, {name: "EDNS 4096", size: 4096}, {name: "EDNS 1232 DO", size: 1232, do: true}, {name: "EDNS 512", size: 512},
	{name: "EDNS version 1", size: 1232, version: 1},
	{name: "EDNS with a cookie", size: 1232, option: &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}}}

// queryFlags are the header bits a query sets.
type queryFlags struct{ rd, cd, ad bool }

// nsdQuery packs question q with id, EDNS as e has it and the header
// flags f.
func nsdQuery(t *testing.T, id uint16, q nsdQuestion, e ednsVariant, f queryFlags) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.Id = id
	m.Question = []dns.Question{{Name: q.name, Qtype: q.qtype, Qclass: q.class}}
	m.RecursionDesired, m.CheckingDisabled, m.AuthenticatedData = f.rd, f.cd, f.ad
	if e.size > 0 {
		m.SetEdns0(e.size, e.do)
		m.IsEdns0().SetVersion(e.version)
		if e.option != nil {
			m.IsEdns0().Option = []dns.EDNS0{e.option}
		}
	}
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return wire
}

type nsdQuestion struct {
	name  string
	qtype uint16
	class uint16
}

// nsdExceptions are the ways Pier's answers differ from NSD's on purpose.
// Anything else that differs fails the test.
var nsdExceptions = []struct {
	why   string
	match func(netw string, q nsdQuestion, d difference) bool
}{
	{
		why: "ANY gets RFC 8482's minimal answer, one synthesized HINFO (TestANYIsMinimal); NSD, with refuse-any off as by default, answers every RRset the name has, and with it on would answer TC over UDP",
		match: func(_ string, q nsdQuestion, d difference) bool {
			return q.qtype == dns.TypeANY && q.class == dns.ClassINET && (d.field == "length" || sectionField(d.field))
		},
	},
	{
		why: "the CD bit is copied into the answer, as RFC 4035 (section 3.1.6) asks of a name server and BIND and Knot do; NSD 4.6 clears every flag of the query but RD",
		match: func(_ string, _ nsdQuestion, d difference) bool {
			return d.field == "cd" && d.pier == "true" && d.nsd == "false"
		},
	},
	{
		why: "a zone transfer over UDP is REFUSED like any transfer that is not a configured secondary's over TCP (TestRefusals); NSD says NOTIMP",
		match: func(netw string, q nsdQuestion, d difference) bool {
			return netw == "udp" && q.qtype == dns.TypeAXFR && d.field == "rcode" && d.pier == "REFUSED" && d.nsd == "NOTIMP"
		},
	},
	{
		why: "class ANY is REFUSED like every class but IN (TestRefusals), with EDE 21 (Not Supported); NSD answers it from the IN data, without the aa flag",
		match: func(_ string, q nsdQuestion, d difference) bool {
			return q.class == dns.ClassANY
		},
	},
}

func sectionField(f string) bool {
	for _, s := range []string{"answer", "authority", "additional"} {
		if strings.HasPrefix(f, s) {
			return true
		}
	}
	return false
}

type difference struct{ field, pier, nsd string }

// compareAnswers lists the fields in which two answers differ.
func compareAnswers(pierRaw, nsdRaw []byte) []difference {
	var p, n dns.Msg
	perr, nerr := p.Unpack(pierRaw), n.Unpack(nsdRaw)
	if perr != nil || nerr != nil {
		return []difference{{"parse", fmt.Sprint(perr), fmt.Sprint(nerr)}}
	}
	var out []difference
	cmp := func(field string, a, b any) {
		if as, bs := fmt.Sprint(a), fmt.Sprint(b); as != bs {
			out = append(out, difference{field, as, bs})
		}
	}
	cmp("id", p.Id, n.Id)
	cmp("qr", p.Response, n.Response)
	cmp("opcode", dns.OpcodeToString[p.Opcode], dns.OpcodeToString[n.Opcode])
	cmp("rcode", dns.RcodeToString[p.Rcode], dns.RcodeToString[n.Rcode])
	cmp("aa", p.Authoritative, n.Authoritative)
	cmp("tc", p.Truncated, n.Truncated)
	cmp("rd", p.RecursionDesired, n.RecursionDesired)
	cmp("ra", p.RecursionAvailable, n.RecursionAvailable)
	cmp("z", p.Zero, n.Zero)
	cmp("ad", p.AuthenticatedData, n.AuthenticatedData)
	cmp("cd", p.CheckingDisabled, n.CheckingDisabled)
	cmp("question", p.Question, n.Question)
	section := func(name string, a, b []dns.RR) {
		cmp(name+" count", len(a), len(b))
		for i := range max(len(a), len(b)) {
			var as, bs string
			if i < len(a) {
				as = a[i].String()
			}
			if i < len(b) {
				bs = b[i].String()
			}
			cmp(fmt.Sprintf("%s[%d]", name, i), as, bs)
		}
	}
	section("answer", p.Answer, n.Answer)
	section("authority", p.Ns, n.Ns)
	section("additional", withoutOPT(p.Extra), withoutOPT(n.Extra))
	po, no := p.IsEdns0(), n.IsEdns0()
	cmp("opt", po != nil, no != nil)
	if po != nil && no != nil {
		cmp("opt udp size", po.UDPSize(), no.UDPSize())
		cmp("opt version", po.Version(), no.Version())
		cmp("opt do", po.Do(), no.Do())
		cmp("opt ext rcode", po.ExtendedRcode(), no.ExtendedRcode())
		cmp("opt options", po.Option, no.Option)
	}
	cmp("length", len(pierRaw), len(nsdRaw))
	return out
}

func withoutOPT(rrs []dns.RR) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

// exchangeRaw sends wire to addr and returns the answer's bytes: over UDP
// one datagram, over TCP one length-prefixed message.
func exchangeRaw(netw, addr string, wire []byte) ([]byte, error) {
	c, err := net.DialTimeout(netw, addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if netw == "udp" {
		if _, err := c.Write(wire); err != nil {
			return nil, err
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	msg := binary.BigEndian.AppendUint16(nil, uint16(len(wire)))
	if _, err := c.Write(append(msg, wire...)); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// servePier starts Pier's DNS server on loopback, one listener per host,
// over a store holding one zone, without response rate limiting, and
// returns their addresses.
func servePier(t testing.TB, hosts []string, domain string, serial int64, recs []dnsserver.Record) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Domains().PutZone(ctx, store.Zone{Domain: domain, OrgID: "org_1", Serial: serial, Records: dnsserver.EncodeRecords(recs), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, h := range hosts {
		s := dnsserver.NewWithLimits(st.Domains(), slog.New(slog.DiscardHandler), noRRL, nil)
		addr, err := s.Listen(ctx, net.JoinHostPort(h, "0"))
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
	}
	return addrs
}

// startNSD runs Debian's NSD in the foreground on a loopback port, serving
// the zone from the master file Pier writes for it (zone.MasterFile, the
// file in a leave package) on each of hosts, and returns its port. Without NSD the test
// is skipped, unless PIER_TEST_NSD=require (CI), which fails instead.
func startNSD(t testing.TB, hosts []string, domain string, serial int64, recs []dnsserver.Record) int {
	t.Helper()
	bin, err := exec.LookPath("nsd")
	if err != nil {
		bin = "/usr/sbin/nsd"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("PIER_TEST_NSD") == "require" || os.Getenv("CI") == "true" {
			t.Fatal("nsd is not installed (.ci/run installs it)")
		}
		t.Skip("nsd is not installed; set PIER_TEST_NSD=require to fail instead")
	}
	master, err := dnsserver.MasterFile(domain, serial, recs)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	zonefile := filepath.Join(dir, domain+".zone")
	if err := os.WriteFile(zonefile, []byte(master), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, hosts)
	confFile := writeNSDConf(t, dir, domain, zonefile, hosts, port)
	cmd := exec.Command(bin, "-d", "-c", confFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(dir, "nsd.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// NSD forks its server and xfrd processes into the group started
		// here; end the group.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		out.Close()
	})
	addr := net.JoinHostPort(hosts[0], fmt.Sprint(port))
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(domain), dns.TypeSOA)
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(m, addr)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			return port
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "nsd.out"))
			nlog, _ := os.ReadFile(filepath.Join(dir, "nsd.log"))
			t.Fatalf("nsd exited: %s%s", log, nlog)
		default:
		}
		if time.Now().After(deadline) {
			nlog, _ := os.ReadFile(filepath.Join(dir, "nsd.log"))
			t.Fatalf("nsd did not answer for %s: %v %v\n%s", domain, err, r, nlog)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeNSDConf writes an nsd.conf in dir serving zonefile for domain on
// port of each of hosts, and answers its path.
func writeNSDConf(t testing.TB, dir, domain, zonefile string, hosts []string, port int) string {
	t.Helper()
	var ips strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&ips, "  ip-address: %s@%d\n", h, port)
	}
	conf := fmt.Sprintf(`server:
%[5]s  port: %[2]d
  username: ""
  chroot: ""
  zonesdir: "%[1]s"
  database: ""
  zonelistfile: "%[1]s/zone.list"
  xfrdfile: "%[1]s/xfrd.state"
  xfrdir: "%[1]s"
  pidfile: "%[1]s/nsd.pid"
  logfile: "%[1]s/nsd.log"
  server-count: 1
  verbosity: 1
  hide-version: yes
  hide-identity: yes
  rrl-ratelimit: 0
  rrl-whitelist-ratelimit: 0
remote-control:
  control-enable: no
zone:
  name: %[3]s
  zonefile: "%[4]s"
`, dir, port, domain, zonefile, ips.String())
	confFile := filepath.Join(dir, "nsd.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return confFile
}

// freePort finds a port free for both UDP and TCP on every host.
func freePort(t testing.TB, hosts []string) int {
	t.Helper()
next:
	for range 20 {
		ln, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		defer ln.Close()
		for i, h := range hosts {
			addr := net.JoinHostPort(h, fmt.Sprint(port))
			if i > 0 {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					continue next
				}
				defer l.Close()
			}
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				continue next
			}
			defer pc.Close()
		}
		return port
	}
	t.Fatal("no port free for UDP and TCP")
	return 0
}
