//go:build !linux

package fastpath

import (
	"net"
	"os"
)

// sendFile is Linux's; elsewhere bodies are written from memory.
func sendFile(net.Conn, []byte, *os.File, int) (bool, error) { return false, nil }
