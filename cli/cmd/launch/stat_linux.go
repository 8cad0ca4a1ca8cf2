package launch

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// statter lstats the files of a site by their paths relative to its
// directory, held open: the kernel walks each path from there, not from
// the root, and nothing is allocated per file.
type statter struct {
	dir string
	fd  int
}

func openStatter(dir string) *statter {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	return &statter{dir: dir, fd: fd}
}

func (s *statter) stat(rel string) (fileStat, error) {
	if s.fd < 0 {
		return lstatPath(filepath.Join(s.dir, rel))
	}
	var st unix.Stat_t
	for {
		err := unix.Fstatat(s.fd, rel, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileStat{}, &os.PathError{Op: "lstat", Path: filepath.Join(s.dir, rel), Err: err}
		}
		break
	}
	return statOf(&st), nil
}

func (s *statter) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
}

// statAt lstats the file name in the folder f holds open, abs being its
// path: the kernel looks up one name, not the site's path to it.
func statAt(f *os.File, name, abs string) (fileStat, error) {
	var st unix.Stat_t
	fd := int(f.Fd())
	for {
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileStat{}, &os.PathError{Op: "lstat", Path: abs, Err: err}
		}
		break
	}
	return statOf(&st), nil
}

func statOf(st *unix.Stat_t) fileStat {
	return fileStat{size: st.Size, mod: time.Unix(st.Mtim.Sec, st.Mtim.Nsec), ino: int64(st.Ino), ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec, regular: st.Mode&unix.S_IFMT == unix.S_IFREG}
}

// statOpen fstats a file held open.
func statOpen(f *os.File) (fileStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(int(f.Fd()), &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileStat{}, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
		}
		return statOf(&st), nil
	}
}

// folderStatter lstats files by their paths under a site's directory,
// holding the folder of the last one open: files that come in walk order
// are each a lookup of one name, as the walk's are.
type folderStatter struct {
	root   string
	folder string
	fd     int
}

func newFolderStatter(root string) *folderStatter {
	return &folderStatter{root: root, folder: "\x00", fd: -1}
}

// stat lstats rel, a slash-separated path under the root.
func (s *folderStatter) stat(rel string) (fileStat, error) {
	folder, name := splitPath(rel)
	if folder != s.folder {
		s.close()
		s.folder = folder
		fd, err := unix.Open(filepath.Join(s.root, filepath.FromSlash(folder)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fileStat{}, err
		}
		s.fd = fd
	}
	if s.fd < 0 {
		return fileStat{}, &os.PathError{Op: "open", Path: filepath.Join(s.root, folder), Err: unix.EBADF}
	}
	var st unix.Stat_t
	for {
		err := unix.Fstatat(s.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileStat{}, &os.PathError{Op: "lstat", Path: filepath.Join(s.root, rel), Err: err}
		}
		return statOf(&st), nil
	}
}

func (s *folderStatter) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
