package watch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirMask is what a folder's watch reports: its entries' writes,
// truncations, metadata, creation, deletion and renames, and its own
// deletion or move.
const dirMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

const (
	// maxChanged is how many changed paths a watcher remembers; past
	// it, it forgets them and answers older tokens "full".
	maxChanged = 200_000
	// maxAnswer is the most paths an answer names; more is "full", as
	// a walk is then as cheap.
	maxAnswer = 50_000
)

// Options are a watcher's.
type Options struct {
	// Root is the folder watched, its real path.
	Root string
	// Socket is where it answers (SocketPath).
	Socket string
	// Idle is how long it waits for a question before it exits;
	// DefaultIdle when 0.
	Idle time.Duration
}

// watcher is one folder's: its inotify watches, by descriptor and by
// folder, and the paths changed, each with the token of the batch of
// events that last named it.
type watcher struct {
	root     string
	fd       int
	instance string

	mu      sync.Mutex
	wds     map[int32]string // a watch's folder, relative to root ("" for root)
	dirs    map[string]int32
	seq     uint64            // the token now
	floor   uint64            // tokens below it are answered "full"
	changed map[string]uint64 // path → the token it last changed at
	broken  string            // why every answer is "full" (the watch limit)
	lost    bool              // the root was deleted or moved
	asked   time.Time         // the last question
	buf     []byte
}

// Run watches o.Root and answers on o.Socket until the root is lost, no
// question came for o.Idle, or ctx ends. A second watcher of the same
// root (the socket's lock held) returns nil at once.
func Run(ctx context.Context, o Options) error {
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if err := os.MkdirAll(filepath.Dir(o.Socket), 0o700); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Dir(o.Socket), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(o.Socket+".lock", os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // another watcher of this root runs
	}
	w, err := newWatcher(o.Root)
	if err != nil {
		return err
	}
	defer w.close()
	os.Remove(o.Socket)        // a stale one: its watcher no longer holds the lock
	umask := unix.Umask(0o077) // the socket is made 0600, not chmodded to it
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: o.Socket, Net: "unix"})
	unix.Umask(umask)
	if err != nil {
		return err
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()
	if err := os.Chmod(o.Socket, 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.serve(ctx, ln)
	return w.loop(ctx, o)
}

func newWatcher(root string) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	id := make([]byte, 8)
	rand.Read(id)
	w := &watcher{root: root, fd: fd, instance: hex.EncodeToString(id), wds: map[int32]string{}, dirs: map[string]int32{}, changed: map[string]uint64{}, seq: 1, floor: 1, asked: time.Now(), buf: make([]byte, 256<<10)}
	if err := w.addTree(""); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return w, nil
}

func (w *watcher) close() { unix.Close(w.fd) }

// loop reads events as they come, so the kernel's queue does not
// overflow between questions, and ends the watcher when its root is lost,
// it sat idle, or its socket is no longer its own.
func (w *watcher) loop(ctx context.Context, o Options) error {
	sock, err := os.Lstat(o.Socket)
	if err != nil {
		return err
	}
	// An idle watcher sleeps in poll until an event, its idle time, the
	// next look at its socket, or ctx's end (written to wake).
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	defer unix.Close(wake)
	stop := context.AfterFunc(ctx, func() { unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0}) })
	defer stop()
	lastCheck := time.Now()
	for ctx.Err() == nil {
		w.mu.Lock()
		left := o.Idle - time.Since(w.asked)
		w.mu.Unlock()
		timeout := min(max(left, 0)+10*time.Millisecond, 10*time.Second)
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(timeout/time.Millisecond)); err != nil && err != unix.EINTR {
			return err
		}
		w.mu.Lock()
		w.drain()
		lost, idle := w.lost, time.Since(w.asked) > o.Idle
		w.mu.Unlock()
		if lost || idle {
			return nil
		}
		if time.Since(lastCheck) >= 10*time.Second {
			lastCheck = time.Now()
			if now, err := os.Lstat(o.Socket); err != nil || !os.SameFile(now, sock) {
				return nil // removed or taken over: nobody can ask this one
			}
		}
	}
	return nil
}

// addTree watches the folder rel and every folder under it but hidden
// ones, as the deploy walks them.
func (w *watcher) addTree(rel string) error {
	abs := w.abs(rel)
	wd, err := unix.InotifyAddWatch(w.fd, abs, dirMask)
	switch {
	case err == unix.ENOSPC || err == unix.ENOMEM:
		w.broken = "the system's inotify watch limit (fs.inotify.max_user_watches) is reached"
		return nil
	case err != nil && rel == "":
		return fmt.Errorf("watching %s: %w", abs, err)
	case err != nil:
		return nil // gone or not a folder: its parent's event names it
	}
	if old, ok := w.wds[int32(wd)]; ok && old != rel {
		delete(w.dirs, old)
	}
	w.wds[int32(wd)], w.dirs[rel] = rel, int32(wd)
	f, err := os.Open(abs)
	if err != nil {
		return nil
	}
	entries, _ := f.ReadDir(-1)
	f.Close()
	for _, e := range entries {
		if e.IsDir() && !hidden(e.Name()) {
			if err := w.addTree(join(rel, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// forgetTree drops the watches of the folder rel and those under it: it
// was deleted or moved away, and what its watches report no longer
// names its paths.
func (w *watcher) forgetTree(rel string) {
	for dir, wd := range w.dirs {
		if dir == rel || strings.HasPrefix(dir, rel+"/") {
			unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.dirs, dir)
			delete(w.wds, wd)
		}
	}
}

func (w *watcher) abs(rel string) string {
	if rel == "" {
		return w.root
	}
	return w.root + "/" + rel
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// drain reads every queued event without blocking and records what it
// names under the next token. Called with mu held.
func (w *watcher) drain() {
	next := w.seq + 1
	got := false
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			name := w.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			got = true
			w.event(ev.Wd, ev.Mask, string(name), next)
		}
	}
	if got {
		w.seq = next
	}
	if len(w.changed) > maxChanged {
		w.changed = map[string]uint64{}
		w.seq++
		w.floor = w.seq
	}
}

// event records one event, at token next.
func (w *watcher) event(wd int32, mask uint32, name string, next uint64) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		// Events were lost, folders made among them: watch the whole
		// tree again and answer every older token "full".
		w.addTree("")
		w.changed = map[string]uint64{}
		w.floor = next
		return
	}
	dir, ok := w.wds[wd]
	if !ok {
		return // a watch dropped since
	}
	if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
		if dir == "" {
			w.lost = true
		}
		if mask&unix.IN_IGNORED != 0 {
			delete(w.wds, wd)
			if w.dirs[dir] == wd {
				delete(w.dirs, dir)
			}
		}
		return // a folder under the root: its parent's event names it
	}
	if name == "" {
		return // the folder's own: its parent's event names it too
	}
	rel := join(dir, name)
	w.changed[rel] = next
	if mask&unix.IN_ISDIR == 0 || hidden(name) {
		return
	}
	switch {
	case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		w.forgetTree(rel)
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		// Watched before the answer that names it: what is made in
		// it from now on is an event, what was made before the
		// deploy finds walking it.
		w.addTree(rel)
	}
}

// answer is what changed since token since of instance.
func (w *watcher) answer(instance string, since uint64) Answer {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = time.Now()
	w.drain()
	a := Answer{Instance: w.instance, Token: w.seq}
	switch {
	case w.broken != "":
		a.Full, a.Reason = true, w.broken
	case w.lost:
		a.Full, a.Reason = true, "the folder was deleted or moved"
	case instance != w.instance:
		a.Full, a.Reason = true, "the token is not this watcher's"
	case since < w.floor || since > w.seq:
		a.Full, a.Reason = true, "events were lost since the token (the kernel's queue overflowed)"
	}
	if a.Full {
		return a
	}
	for p, s := range w.changed {
		if s > since {
			a.Paths = append(a.Paths, p)
		}
	}
	if len(a.Paths) > maxAnswer {
		return Answer{Instance: w.instance, Token: w.seq, Full: true, Reason: "too many changes to name"}
	}
	slices.Sort(a.Paths)
	return a
}

// serve answers questions, one a connection, from processes of the
// watcher's own user.
func (w *watcher) serve(ctx context.Context, ln *net.UnixListener) {
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go w.handle(c)
	}
}

func (w *watcher) handle(c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if uid, err := peerUID(c); err != nil || uid != os.Getuid() {
		return
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "since" {
		fmt.Fprintf(c, "%s 1 error - 0 0 bad question\n", protocol)
		return
	}
	since, _ := strconv.ParseUint(f[2], 10, 64)
	c.Write(encode(w.answer(f[1], since)))
}

// peerUID is the user of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	uid := -1
	var cerr error
	err = raw.Control(func(fd uintptr) {
		var cred *unix.Ucred
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if cerr == nil {
			uid = int(cred.Uid)
		}
	})
	if err == nil {
		err = cerr
	}
	return uid, err
}
