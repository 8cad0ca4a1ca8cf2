package launch

import (
	"io/fs"
	"syscall"
)

// fileIdentity is what tells a file's record apart beyond its size and
// modification time, as git's index does: its inode (a file replaced by
// another) and its change time, which every write, chmod and utimes moves
// and no user call sets back.
func fileIdentity(info fs.FileInfo) (ino, ctime int64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return int64(st.Ino), st.Ctim.Sec*1e9 + st.Ctim.Nsec
}
