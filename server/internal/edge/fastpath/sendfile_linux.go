package fastpath

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendFile writes head and then the first n bytes of f to c, a TCP
// connection: head with MSG_MORE, so that it leaves with the body's first
// segment, and the body with sendfile(2) from offset 0, which hands the
// file's pages to the socket instead of copying them from user space.
// handled is false, with nothing written, when c is not a connection that
// can (then the caller writes from memory). Write deadlines hold: the
// wait for the socket to take more goes through the runtime's poller.
func sendFile(c net.Conn, head []byte, f *os.File, n int) (handled bool, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	src := int(f.Fd())
	var off int64
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(head) > 0 {
			m, err := unix.SendmsgN(int(fd), head, nil, nil, unix.MSG_MORE|unix.MSG_NOSIGNAL)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false
			case err != nil:
				werr = err
				return true
			}
			head = head[m:]
		}
		for off < int64(n) {
			m, err := unix.Sendfile(int(fd), src, &off, n-int(off))
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false
			case err != nil:
				werr = err
				return true
			case m == 0:
				werr = io.ErrUnexpectedEOF // the file is sealed: never
				return true
			}
		}
		return true
	})
	runtime.KeepAlive(f)
	if err == nil {
		err = werr
	}
	if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
		err = net.ErrClosed
	}
	return true, err
}
