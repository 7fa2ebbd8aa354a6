package server

import (
	"encoding/binary"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// From linux/unix_diag.h.
const (
	udiagShowPeer = 0x4
	unixDiagPeer  = 2
	// unixDiagReqLen and unixDiagMsgLen are sizeof(struct unix_diag_req)
	// and sizeof(struct unix_diag_msg).
	unixDiagReqLen = 24
	unixDiagMsgLen = 16
)

// unixPeer returns the inode of the other end of the Unix socket with
// inode ino, as the kernel's sock_diag tells it (what ss -x shows as the
// peer): a socketpair's two ends have inodes of their own, and a client
// whose child's output is a socketpair (Node's child_process) knows only
// its own end's. It wraps lineage.ErrInvalid when this network namespace
// has no such socket, or it has no peer.
func unixPeer(ino uint64) (uint64, error) {
	if ino > 0xffffffff {
		return 0, fmt.Errorf("%w socket %d: a Unix socket's inode fits 32 bits", lineage.ErrInvalid, ino)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(time.Second.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	req := make([]byte, unix.NLMSG_HDRLEN+unixDiagReqLen)
	le := binary.NativeEndian
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	le.PutUint16(req[6:], unix.NLM_F_REQUEST)
	le.PutUint32(req[8:], 1) // seq
	d := req[unix.NLMSG_HDRLEN:]
	d[0] = unix.AF_UNIX
	le.PutUint32(d[4:], 0xffffffff) // every state
	le.PutUint32(d[8:], uint32(ino))
	le.PutUint32(d[12:], udiagShowPeer)
	le.PutUint32(d[16:], 0xffffffff) // no cookie
	le.PutUint32(d[20:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	return parsePeerAnswer(buf[:n], ino)
}

// parsePeerAnswer reads the peer's inode from sock_diag's answer about ino.
func parsePeerAnswer(b []byte, ino uint64) (uint64, error) {
	le := binary.NativeEndian
	if len(b) < unix.NLMSG_HDRLEN {
		return 0, fmt.Errorf("sock_diag: a %d-byte answer", len(b))
	}
	if le.Uint16(b[4:]) == unix.NLMSG_ERROR {
		errno := 0
		if len(b) >= unix.NLMSG_HDRLEN+4 {
			errno = -int(int32(le.Uint32(b[unix.NLMSG_HDRLEN:])))
		}
		return 0, fmt.Errorf("%w socket %d: no Unix socket of that inode here: %v", lineage.ErrInvalid, ino, unix.Errno(errno))
	}
	size := min(int(le.Uint32(b[0:])), len(b))
	attrs := b[min(unix.NLMSG_HDRLEN+unixDiagMsgLen, size):size]
	for len(attrs) >= 4 {
		l, typ := int(le.Uint16(attrs[0:])), le.Uint16(attrs[2:])
		if l < 4 || l > len(attrs) {
			break
		}
		if typ == unixDiagPeer && l >= 8 {
			if peer := le.Uint32(attrs[4:]); peer != 0 {
				return uint64(peer), nil
			}
		}
		attrs = attrs[(l+3)&^3:]
	}
	return 0, fmt.Errorf("%w socket %d: it has no peer", lineage.ErrInvalid, ino)
}
