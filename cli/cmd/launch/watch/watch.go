// Package watch is the resident watcher a deploy of a large folder asks
// what changed, as git asks its fsmonitor daemon (or watchman): one
// process a folder, `pier __watch`, that holds an inotify watch on each
// of its folders and answers on a unix socket "what changed since token
// T" with the paths created, modified, deleted or renamed since, or
// "full" when it cannot tell (T not its own, an overflowed event queue,
// the system's watch limit). The deploy then stats only those paths
// instead of every file; any doubt (no watcher, no answer within a few
// milliseconds, an untrusted socket, "full") is a full walk, so an answer
// is never wrong, only slower.
//
// The watcher drains its inotify queue before it answers: the kernel
// queues a file's event in the very call that writes it, so every write
// that returned before the question is in the answer. Nothing is written
// into the watched folder.
//
// The socket is in the user's cache folder next to the digest cache
// (mode 0700 folder, 0600 socket), named by a hash of the folder's real
// path; the client trusts it only when it is a socket owned by the user
// with no group or other permission, and when the process on the other
// end runs as the user (SO_PEERCRED). The watcher exits after an idle
// period without a question and when its folder is deleted or moved.
package watch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"time"
)

// Answer is the watcher's answer to "what changed since".
type Answer struct {
	// Instance names the watcher process: a token from another one
	// means nothing to it.
	Instance string
	// Token is where the answer leaves off: ask "since Token" next.
	Token uint64
	// Full: the watcher cannot tell what changed since the token asked
	// about; walk everything (and keep Token for the next question).
	Full bool
	// Reason says why an answer is Full.
	Reason string
	// Paths changed since the token, relative to the folder and
	// slash-separated, sorted: files and folders created, modified,
	// deleted or renamed (both names). A folder's path stands for
	// everything under it.
	Paths []string
}

// Errors of Query that say no watcher should be started.
var (
	// ErrUntrusted: something is at the socket's path that is not the
	// user's own socket, or another user answers on it.
	ErrUntrusted = errors.New("the watcher's socket is not the user's own")
	// ErrUnsupported: this system has no watcher.
	ErrUnsupported = errors.New("no file-system watcher on this system")
)

// protocol is the first word of an answer's header.
const protocol = "pier-watch"

// DefaultIdle is how long a watcher waits for a question before it exits.
const DefaultIdle = 30 * time.Minute

// SocketPath names the socket of the watcher of the folder whose real
// path is root, under the cache folder cacheRoot (as digests are).
func SocketPath(cacheRoot, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(cacheRoot, "watch", hex.EncodeToString(sum[:8])+".sock")
}

// hidden reports whether a name is one the deploy leaves out: a hidden
// file or folder other than .well-known.
func hidden(name string) bool {
	return strings.HasPrefix(name, ".") && name != ".well-known"
}

// Hidden reports whether any part of a slash-separated path is hidden,
// so that the deploy leaves it out.
func Hidden(rel string) bool {
	for rel != "" {
		part, rest, _ := strings.Cut(rel, "/")
		if hidden(part) {
			return true
		}
		rel = rest
	}
	return false
}
