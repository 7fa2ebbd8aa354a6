//go:build linux

package reap

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// pidfds is the default Signaler: a pin is a pidfd, and exits are awaited
// through an epoll set of them (a pidfd becomes readable when its process
// exits), so waiting costs O(exits), not O(members), per wakeup.
type pidfds struct {
	epfd   int
	events []unix.EpollEvent
}

func newPidfds() (*pidfds, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	return &pidfds{epfd: epfd, events: make([]unix.EpollEvent, 1024)}, nil
}

func (p *pidfds) Open(id lineage.Identity) (Pin, error) {
	pid := int(id.PID)
	fd, err := openPidfd(pid)
	if err != nil {
		return 0, err
	}
	// One-shot: once readable it is reported once and then disabled by the
	// kernel, with no EPOLL_CTL_DEL per exit.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return 0, fmt.Errorf("watch pidfd of %d: %w", pid, err)
	}
	return Pin(fd), nil
}

func (p *pidfds) Send(pin Pin, sig syscall.Signal) error { return sendPidfd(int(pin), sig) }

func (p *pidfds) Wait(timeout time.Duration) ([]Pin, error) {
	ms := int((timeout + time.Millisecond - 1) / time.Millisecond)
	n, err := unix.EpollWait(p.epfd, p.events, ms)
	if errors.Is(err, unix.EINTR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("epoll_wait: %w", err)
	}
	pins := make([]Pin, n)
	for i, ev := range p.events[:n] {
		pins[i] = Pin(ev.Fd)
	}
	return pins, nil
}

// Status asks the kernel for the exit status (PIDFD_INFO_EXIT, Linux 6.15+).
// It is known only once the process has been reaped by its parent.
func (p *pidfds) Status(pin Pin) (lineage.ExitStatus, bool) {
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_EXIT}
	if err := unix.IoctlPidfdInfo(int(pin), &info); err != nil || info.Mask&unix.PIDFD_INFO_EXIT == 0 {
		return 0, false
	}
	return lineage.ExitStatus(info.Exit_code), true
}

// Release closes the pidfd, which also takes it out of the epoll set.
func (p *pidfds) Release(pin Pin) { unix.Close(int(pin)) }

func (p *pidfds) Close() error { return unix.Close(p.epfd) }
