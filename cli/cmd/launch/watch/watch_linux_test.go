package watch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// running is a watcher of a temporary folder, run in the test's process
// (package launch's tests run it as a process of its own).
type running struct {
	t        *testing.T
	root     string
	sock     string
	done     chan error
	instance string
	token    uint64
}

func startWatching(t *testing.T, idle time.Duration) *running {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &running{t: t, root: root, sock: SocketPath(t.TempDir(), root), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { r.done <- Run(ctx, Options{Root: root, Socket: r.sock, Idle: idle}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Error("the watcher did not stop")
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a, err := Query(r.sock, "", 0, time.Second)
		if err == nil {
			if !a.Full {
				t.Fatalf("a token of no watcher answered %+v", a)
			}
			r.instance, r.token = a.Instance, a.Token
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher never answered: %v", err)
		}
	}
}

// changes asks what changed since the last question.
func (r *running) changes() []string {
	r.t.Helper()
	a, err := Query(r.sock, r.instance, r.token, 2*time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	if a.Full || a.Instance != r.instance {
		r.t.Fatalf("answered full: %+v", a)
	}
	r.token = a.Token
	return a.Paths
}

func (r *running) write(rel, content string, flag int) {
	r.t.Helper()
	p := filepath.Join(r.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	f, err := os.OpenFile(p, flag|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		r.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		r.t.Fatal(err)
	}
}

// want checks the paths changed since the last question. A folder's path
// stands for everything under it, so what is under a path named is left
// out: whether the watcher named it too depends on whether it had
// watched the new folder by then.
func (r *running) want(what string, paths ...string) {
	r.t.Helper()
	slices.Sort(paths)
	all := r.changes()
	set := map[string]bool{}
	for _, p := range all {
		set[p] = true
	}
	var got []string
	for _, p := range all {
		above := false
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			above = above || set[d]
		}
		if !above {
			got = append(got, p)
		}
	}
	if !slices.Equal(got, paths) {
		r.t.Fatalf("%s: changed %q, want %q", what, got, paths)
	}
}

// Every kind of change is in the very next answer, with no wait between
// the write and the question: edits in place, appends, truncations,
// files created, deleted and renamed, folders created, renamed and
// deleted, and a file made in a folder made since the last question.
func TestWatcherNamesEveryChange(t *testing.T) {
	r := startWatching(t, 0)
	r.write("a.html", "aaaa", 0)
	r.write("sub/b.html", "bbbb", 0)
	r.want("files made", "a.html", "sub")
	r.want("nothing")
	r.write("a.html", "AAAA", 0)
	r.want("an edit in place", "a.html")
	r.write("sub/b.html", "more", os.O_APPEND)
	r.want("an append", "sub/b.html")
	r.write("sub/b.html", "", os.O_TRUNC)
	r.want("a truncation", "sub/b.html")
	if err := os.Rename(filepath.Join(r.root, "a.html"), filepath.Join(r.root, "sub/a2.html")); err != nil {
		t.Fatal(err)
	}
	r.want("a file renamed", "a.html", "sub/a2.html")
	if err := os.Remove(filepath.Join(r.root, "sub/a2.html")); err != nil {
		t.Fatal(err)
	}
	r.want("a file deleted", "sub/a2.html")
	if err := os.Mkdir(filepath.Join(r.root, "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.want("a folder made", "new")
	r.write("new/deeper/c.html", "c", 0)
	r.want("a folder made in the new folder", "new/deeper")
	r.write("new/deeper/c.html", "C", 0)
	r.want("a file of the newest folder edited", "new/deeper/c.html")
	if err := os.Rename(filepath.Join(r.root, "new"), filepath.Join(r.root, "moved")); err != nil {
		t.Fatal(err)
	}
	r.want("a folder renamed", "moved", "new")
	r.write("moved/deeper/c.html", "CC", 0)
	r.want("a file of the renamed folder edited, by its new path", "moved/deeper/c.html")
	if err := os.RemoveAll(filepath.Join(r.root, "moved")); err != nil {
		t.Fatal(err)
	}
	r.want("a folder deleted", "moved")
	if err := os.Chtimes(filepath.Join(r.root, "sub/b.html"), time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	r.want("a time set back", "sub/b.html")
}

// A token from another watcher, or none, is answered "full".
func TestWatcherAnswersFullToOtherTokens(t *testing.T) {
	r := startWatching(t, 0)
	for _, q := range []struct {
		instance string
		token    uint64
	}{{"", 0}, {"0123456789abcdef", r.token}, {r.instance, r.token + 5}} {
		a, err := Query(r.sock, q.instance, q.token, time.Second)
		if err != nil || !a.Full || a.Instance != r.instance {
			t.Fatalf("since %s %d: %+v, %v", q.instance, q.token, a, err)
		}
	}
}

// When the kernel's queue overflows, every older token is answered
// "full"; a token taken after is answered in full again.
func TestWatcherOverflowIsFull(t *testing.T) {
	root := t.TempDir()
	w, err := newWatcher(root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	before := w.answer(w.instance, 1)
	// More distinct events than the queue holds (16,384 by default),
	// none read meanwhile.
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		fmt.Sscan(string(b), &limit)
	}
	if limit <= 100_000 {
		for i := range limit + 10 {
			if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("%06d", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		// A queue too large to fill within the test's bounds: the
		// kernel's overflow event, as drain would read it.
		w.mu.Lock()
		w.event(-1, unix.IN_Q_OVERFLOW, "", w.seq+1)
		w.seq++
		w.mu.Unlock()
	}
	if a := w.answer(w.instance, before.Token); !a.Full {
		t.Fatalf("after an overflow: %d paths, not full", len(a.Paths))
	}
	after := w.answer("", 0)
	if err := os.WriteFile(filepath.Join(root, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if a := w.answer(w.instance, after.Token); a.Full || !slices.Equal(a.Paths, []string{"x"}) {
		t.Fatalf("a token taken after the overflow: %+v", a)
	}
}

// A watcher exits when its folder is deleted, and when no question came
// for its idle time; its socket goes with it.
func TestWatcherExits(t *testing.T) {
	r := startWatching(t, 0)
	if err := os.RemoveAll(r.root); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		r.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher outlived its folder")
	}
	if _, err := os.Lstat(r.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket is left: %v", err)
	}
	idle := startWatching(t, 200*time.Millisecond)
	select {
	case err := <-idle.done:
		idle.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher outlived its idle time")
	}
}

// A socket that is not the user's own, or in a folder others may write
// to, is not asked; nor is a file that is not a socket. A second watcher
// of the same folder leaves the first one answering.
func TestWatcherSocketTrust(t *testing.T) {
	r := startWatching(t, 0)
	if err := Run(context.Background(), Options{Root: r.root, Socket: r.sock}); err != nil {
		t.Fatalf("a second watcher: %v", err)
	}
	r.want("after a second watcher started")
	if err := os.Chmod(r.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Query(r.sock, "", 0, time.Second); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("a socket others may write to: %v", err)
	}
	os.Chmod(r.sock, 0o600)
	if err := os.Chmod(filepath.Dir(r.sock), 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Query(r.sock, "", 0, time.Second); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("a socket in a folder others may write to: %v", err)
	}
	os.Chmod(filepath.Dir(r.sock), 0o700)
	if os.Getuid() == 0 {
		// Another user's socket (root can make one).
		if err := os.Lchown(r.sock, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := Query(r.sock, "", 0, time.Second); !errors.Is(err, ErrUntrusted) {
			t.Fatalf("another user's socket: %v", err)
		}
		os.Lchown(r.sock, 0, 0)
	}
	file := filepath.Join(filepath.Dir(r.sock), "file.sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Query(file, "", 0, time.Second); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("a file: %v", err)
	}
	// A listener of the user's that is not a watcher: an error, not a
	// hang.
	other := filepath.Join(filepath.Dir(r.sock), "other.sock")
	ln, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(other, 0o600)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	if _, err := Query(other, "", 0, time.Second); err == nil {
		t.Fatal("a listener that is no watcher answered")
	}
	r.want("at the end")
}

// What a watcher keeps is bounded: an answer naming more than maxAnswer
// paths is "full", and past maxChanged paths remembered it forgets them
// all and answers every older token "full".
func TestWatcherBoundsWhatItKeeps(t *testing.T) {
	w, err := newWatcher(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	before := w.answer("", 0)
	record := func(n int) { // as drain records events, with mu held
		w.mu.Lock()
		defer w.mu.Unlock()
		next := w.seq + 1
		for i := range n {
			w.event(w.dirs[""], unix.IN_CREATE, fmt.Sprintf("f%07d", i), next)
		}
		w.seq = next
		if n > maxChanged {
			w.drain()
		}
	}
	record(maxAnswer + 1)
	if a := w.answer(w.instance, before.Token); !a.Full || len(a.Paths) != 0 {
		t.Fatalf("%d paths changed: %d named, full %v", maxAnswer+1, len(a.Paths), a.Full)
	}
	record(maxChanged + 1)
	if len(w.changed) != 0 {
		t.Fatalf("%d paths kept past the bound of %d", len(w.changed), maxChanged)
	}
	if a := w.answer(w.instance, before.Token); !a.Full {
		t.Fatalf("a token from before the paths were forgotten: %+v", a.Reason)
	}
}
