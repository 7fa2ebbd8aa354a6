package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// The pipes between a Command and its command: stdin fed from a reader,
// stdout and stderr copied to writers until end of file or the hold
// delay's end.

func (c *Command) setupStdin(childEnds *[]*os.File) error {
	switch in := c.Stdin.(type) {
	case nil:
	case *os.File:
		c.cmd.Stdin = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		*childEnds = append(*childEnds, r)
		c.cmd.Stdin = r
		c.stdin = &inPipe{w: w, r: in}
	}
	return nil
}

func (c *Command) setupOutput(childEnds *[]*os.File) error {
	var shared *os.File
	for _, s := range []struct {
		name string
		w    io.Writer
		set  *io.Writer
	}{{"stdout", c.Stdout, &c.cmd.Stdout}, {"stderr", c.Stderr, &c.cmd.Stderr}} {
		switch out := s.w.(type) {
		case nil:
		case *os.File:
			*s.set = out
		default:
			if s.name == "stderr" && shared != nil && sameWriter(c.Stdout, c.Stderr) {
				*s.set = shared
				c.pipes[len(c.pipes)-1].streams = append(c.pipes[len(c.pipes)-1].streams, "stderr")
				continue
			}
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			*childEnds = append(*childEnds, w)
			p := &outPipe{r: r, w: out, streams: []string{s.name}, done: make(chan struct{})}
			if p.ino, err = inode(r); err != nil {
				r.Close()
				return err
			}
			c.pipes = append(c.pipes, p)
			*s.set = w
			if s.name == "stdout" {
				shared = w
			}
		}
	}
	return nil
}

// sameWriter reports whether a and b are the same writer, as os/exec
// decides that Stdout and Stderr share a pipe.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false // not comparable
		}
	}()
	return a == b
}

func (c *Command) closePipes() {
	for _, p := range c.pipes {
		p.r.Close()
	}
	if c.stdin != nil {
		c.stdin.w.Close()
	}
}

// outPipe copies one of the command's output pipes to its writer.
type outPipe struct {
	r       *os.File
	w       io.Writer
	ino     uint64
	streams []string
	// done is closed when the copy ends: end of file, stopped, or failed
	// (err set).
	done chan struct{}
	err  error
}

// copy copies until end of file, or until stop, after which it takes what
// the pipe holds at that moment without waiting for more. A writer that
// fails ends the copy and closes the pipe: the command's next write fails,
// as it does when a shell pipeline's reader goes away.
func (p *outPipe) copy() {
	defer close(p.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := p.r.Read(buf)
		if n > 0 {
			if _, werr := p.w.Write(buf[:n]); werr != nil {
				p.err = werr
				p.r.Close()
				return
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			p.drain(buf)
			return
		case errors.Is(err, io.EOF):
			return
		default:
			p.err = err
			return
		}
	}
}

// stop ends a copy that waits for more: its pending read returns at once.
func (p *outPipe) stop() { _ = p.r.SetReadDeadline(time.Unix(1, 0)) }

// drain writes what the pipe holds now, reading without waiting.
func (p *outPipe) drain(buf []byte) {
	if err := p.r.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	raw, err := p.r.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n int
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), buf)
			return true // one try: EAGAIN means empty, and we don't wait
		}); err != nil || rerr != nil || n <= 0 {
			return
		}
		if _, err := p.w.Write(buf[:n]); err != nil {
			p.err = err
			return
		}
	}
}

// inPipe feeds the command's stdin from a reader.
type inPipe struct {
	w *os.File
	r io.Reader
}

// copy feeds until the reader ends, then closes the pipe so the command
// reads end of file. Once the command has exited the pipe is closed under
// it (Wait does), which ends a write that waits; a Read of the reader that
// never returns keeps this goroutine, as it would os/exec's.
func (p *inPipe) copy() {
	_, _ = io.Copy(p.w, p.r)
	p.w.Close()
}

// inode is f's inode: a pipe's, shared by its two ends. It reads it
// through the raw descriptor: f.Fd would make f blocking, and its read
// deadlines would stop working.
func inode(f *os.File) (uint64, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("client: stat pipe: %w", err)
	}
	var st syscall.Stat_t
	var statErr error
	if err := raw.Control(func(fd uintptr) { statErr = syscall.Fstat(int(fd), &st) }); err != nil || statErr != nil {
		return 0, fmt.Errorf("client: stat pipe: %w", errors.Join(err, statErr))
	}
	return st.Ino, nil
}

// startTicks reads the start time of pid, field 22 of /proc/PID/stat.
func startTicks(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	st, err := lineage.ParseStat(pid, data, "")
	if err != nil {
		return 0, err
	}
	return st.StartTicks, nil
}

// prefixBuffer keeps the first max bytes written to it.
type prefixBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (p *prefixBuffer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if room := p.max - p.b.Len(); room > 0 {
		p.b.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}

func (p *prefixBuffer) Bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.Bytes()
}
