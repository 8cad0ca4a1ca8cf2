package edge

import (
	"os"
	"runtime"
	"sync/atomic"
)

// SendfileMin is the body size from which the edge keeps a form in a
// file of its own as well (on Linux: an unnamed temporary file, or a
// sealed memfd), so that plain
// HTTP/1.1 can send it with sendfile(2) instead of copying it from user
// space; smaller bodies are cheaper to copy after their head in one write
// (bench/README.md, "Zero-copy large files").
const SendfileMin = 16 << 10

// makeFiles makes the files of a blob's forms of at least SendfileMin
// bytes. A form whose file cannot be made (another system, a sandbox that
// refuses memfd_create) has none and is written from memory.
func (b *blob) makeFiles() {
	for enc, body := range b.forms {
		if len(body) < SendfileMin {
			continue
		}
		if bodyFiles.Add(1) > maxBodyFiles {
			bodyFiles.Add(-1)
			continue
		}
		f, pinned, err := newBodyFile(body)
		if err != nil {
			bodyFiles.Add(-1)
			continue
		}
		runtime.AddCleanup(f, func(struct{}) { bodyFiles.Add(-1) }, struct{}{})
		b.files[enc] = f
		if pinned {
			b.fileBytes += int64(len(body))
		}
	}
}

// maxBodyFiles bounds the descriptors body files hold, whatever the hot
// cache's budget and the bodies' sizes, so that they never crowd out
// connections; bodies past it are written from memory.
const maxBodyFiles = 4096

// bodyFiles counts the body files open (closed ones leave the count
// when the garbage collector finds them unreachable).
var bodyFiles atomic.Int64

// fileFor is a form's file, nil when it has none. The file is read only
// at explicit offsets (sendfile with an offset), never through its own
// position, so connections share it; it closes when the garbage collector
// finds it unreachable, after every connection using it let go.
func (b *blob) fileFor(enc int) *os.File { return b.files[enc] }
