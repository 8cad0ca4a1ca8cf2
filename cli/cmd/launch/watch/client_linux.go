package watch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// encode writes an answer: a header line "pier-watch 1 ok|full INSTANCE
// TOKEN COUNT [REASON]", then COUNT paths, each ended by a NUL.
func encode(a Answer) []byte {
	kind := "ok"
	if a.Full {
		kind = "full"
	}
	size := 64 + len(a.Reason)
	for _, p := range a.Paths {
		size += len(p) + 1
	}
	out := fmt.Appendf(make([]byte, 0, size), "%s 1 %s %s %d %d %s\n", protocol, kind, a.Instance, a.Token, len(a.Paths), a.Reason)
	for _, p := range a.Paths {
		out = append(append(out, p...), 0)
	}
	return out
}

// decode reads an answer.
func decode(r *bufio.Reader) (*Answer, error) {
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	f := strings.SplitN(strings.TrimSuffix(head, "\n"), " ", 7)
	if len(f) < 6 || f[0] != protocol || f[1] != "1" || (f[2] != "ok" && f[2] != "full") {
		return nil, fmt.Errorf("the watcher answered %q", head)
	}
	a := &Answer{Instance: f[3], Full: f[2] == "full"}
	if len(f) == 7 {
		a.Reason = f[6]
	}
	var err1, err2 error
	a.Token, err1 = strconv.ParseUint(f[4], 10, 64)
	n, err2 := strconv.Atoi(f[5])
	if err1 != nil || err2 != nil || n < 0 || n > maxAnswer {
		return nil, fmt.Errorf("the watcher answered %q", head)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if bytes.Count(body, []byte{0}) != n || (n > 0 && body[len(body)-1] != 0) {
		return nil, fmt.Errorf("the watcher's answer names %d paths, not %d", bytes.Count(body, []byte{0}), n)
	}
	a.Paths = make([]string, 0, n)
	for rest := string(body); rest != ""; {
		p, tail, _ := strings.Cut(rest, "\x00")
		a.Paths, rest = append(a.Paths, p), tail
	}
	return a, nil
}

// Trusted checks that sock is the user's own socket in a folder of the
// user's that no one else may write to: no other user could have put it
// there or listen on it.
func Trusted(sock string) error {
	uid := uint32(os.Getuid())
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(sock), os.ModeDir}, {sock, os.ModeSocket}} {
		info, err := os.Lstat(c.path)
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%w: %s has no owner", ErrUntrusted, c.path)
		}
		if info.Mode().Type() != c.mode || st.Uid != uid || info.Mode().Perm()&0o077 != 0 {
			return fmt.Errorf("%w: %s is %v, owned by uid %d", ErrUntrusted, c.path, info.Mode(), st.Uid)
		}
	}
	return nil
}

// Query asks the watcher at sock what changed since token of instance
// ("" for none), waiting at most timeout for the whole answer. An error
// wrapping ErrUntrusted says the socket must not be used.
func Query(sock, instance string, token uint64, timeout time.Duration) (*Answer, error) {
	if err := Trusted(sock); err != nil {
		return nil, err
	}
	if instance == "" {
		instance = "-"
	}
	deadline := time.Now().Add(timeout)
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := conn.(*net.UnixConn)
	c.SetDeadline(deadline)
	if uid, err := peerUID(c); err != nil || uid != os.Getuid() {
		return nil, fmt.Errorf("%w: uid %d answers on %s", ErrUntrusted, uid, sock)
	}
	if _, err := fmt.Fprintf(c, "since %s %d\n", instance, token); err != nil {
		return nil, err
	}
	return decode(bufio.NewReaderSize(c, 64<<10))
}
