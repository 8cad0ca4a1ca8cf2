package edge

import (
	"os"

	"golang.org/x/sys/unix"
)

// newBodyFile copies data into a file of its own: an unnamed file
// (O_TMPFILE) in the temporary directory when its file system offers
// them, whose page cache holds large folios on ext4 and XFS, so sendfile
// moves a body in fewer, larger pieces; otherwise a memfd sealed against
// every change. Neither has a name another process could open it by,
// and both go when closed. pinned is true for a memfd, whose pages only
// swap can take; a temporary file's pages are cache the kernel reclaims
// (and reads again from disk) under memory pressure.
func newBodyFile(data []byte) (f *os.File, pinned bool, err error) {
	if f, err := tmpBodyFile(data); err == nil {
		return f, false, nil
	}
	f, err = memBodyFile(data)
	return f, true, err
}

func memBodyFile(data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("pier-body", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "pier-body")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func tmpBodyFile(data []byte) (*os.File, error) {
	fd, err := unix.Open(os.TempDir(), unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "pier-body")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
