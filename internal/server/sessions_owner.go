package server

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/policy"
)

func contextBackground() context.Context { return context.Background() }

// watchOwner closes se, as a session close calls for and on behalf of the
// uid that opened it, when its owner process exits. The owner is pinned by
// a pidfd whose start time is checked after opening, so a reused pid can't
// stand in for it; the wait runs on Go's poller. It fails when the owner is
// already gone. Call with reg.mu held.
func (s *Server) watchOwner(se *session) error {
	id := *se.owner
	fd, err := unix.PidfdOpen(int(id.PID), unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("owner %s: %w", id, err)
	}
	if err := s.proc.Check(id); err != nil {
		unix.Close(fd)
		return fmt.Errorf("owner %s: %w", id, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fmt.Errorf("owner %s: %w", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	se.ownerWatch = func() { cancel(); f.Close() }
	go func() {
		first := true
		// A pidfd turns readable when its process exits.
		err := raw.Read(func(uintptr) bool {
			if first {
				first = false
				return false
			}
			return true
		})
		if err != nil || ctx.Err() != nil {
			return
		}
		s.note("lineage: session %s: owner %s exited: closing it (%s)\n", se.id, id, policy.SessionClose)
		s.closeSession(ctx, se.id, se.uid)
	}()
	return nil
}
