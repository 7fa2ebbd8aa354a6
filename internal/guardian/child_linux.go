package guardian

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/lineage"
)

// ControlFD is the descriptor the guardian reads lineage's messages from;
// the bpf handoff descriptors follow it.
const ControlFD = 3

// ErrDisarmed is wrapped by [Serve]'s error when the guardian stopped
// guarding without signalling anything: it could not read what lineage
// sent, or could not take over the membership.
var ErrDisarmed = errors.New("guardian disarmed")

// ServeOptions are where [Serve] finds what it needs besides the pipe.
type ServeOptions struct {
	// Stderr receives one line when the guardian reaps or disarms; nil
	// discards it.
	Stderr io.Writer
	// Files returns the n bpf handoff descriptors; nil means the inherited
	// descriptors ControlFD+1 to ControlFD+n.
	Files func(n int) ([]*os.File, error)
}

// Main runs the guardian's side in a process started by [Start]: it serves
// the pipe on ControlFD and returns the process's exit status (0 when it
// exited as told or reaped, 1 otherwise). It ignores SIGPIPE, so that a
// closed stderr (a runner gone with lineage) can't end it mid-reap.
func Main(stderr io.Writer) int {
	signal.Ignore(syscall.SIGPIPE)
	ctrl := os.NewFile(ControlFD, "lineage-control")
	if err := Serve(ctrl, ServeOptions{Stderr: stderr}); err != nil {
		fmt.Fprintf(stderr, "lineage guardian: %v\n", err)
		return 1
	}
	return 0
}

// Serve reads lineage's messages from ctrl until done, which ends it at
// once, or the end of the pipe without done, which means lineage died: then
// it reaps the lineage as the hello said (see the package documentation)
// before it returns. A pipe that ends before the hello has nothing to
// guard. Anything it can't read disarms it: it returns an error wrapping
// ErrDisarmed, having signalled nothing.
func Serve(ctrl io.Reader, opts ServeOptions) error {
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.Files == nil {
		opts.Files = inherited
	}
	lines := bufio.NewScanner(ctrl)
	lines.Buffer(make([]byte, 0, 4096), MaxLine)
	if !lines.Scan() {
		if err := lines.Err(); err != nil {
			return fmt.Errorf("%w: read hello: %w", ErrDisarmed, err)
		}
		return nil
	}
	m, err := decode(lines.Bytes())
	if err == nil && m.Hello == nil {
		err = fmt.Errorf("%w message: the first must be a hello", lineage.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDisarmed, err)
	}
	h := m.Hello
	src, err := openSource(h, opts.Files)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDisarmed, err)
	}
	defer src.close()
	var root lineage.Identity
	for lines.Scan() {
		m, err := decode(lines.Bytes())
		switch {
		case err != nil:
		case m.Hello != nil:
			err = fmt.Errorf("%w message: a second hello", lineage.ErrInvalid)
		case m.Root != nil && !root.IsZero():
			err = fmt.Errorf("%w message: a second root", lineage.ErrInvalid)
		case m.Root != nil:
			root = *m.Root
			src.setRoot(root)
		case m.Member != nil && root.IsZero():
			err = fmt.Errorf("%w message: a member before the root", lineage.ErrInvalid)
		case m.Member != nil:
			err = src.add(*m.Member)
		case m.Done:
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrDisarmed, err)
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrDisarmed, err)
	}
	if root.IsZero() {
		return nil // lineage died before its job ran
	}
	return abort(h, root, src, opts.Stderr)
}

// inherited returns the n descriptors that follow ControlFD, after
// checking that each is a BPF object: a hello that names more descriptors
// than were passed must not make the guardian take over (and later close)
// one of its own.
func inherited(n int) ([]*os.File, error) {
	if n > bpf.MaxHandoffFiles {
		return nil, fmt.Errorf("%w hello: %d bpf descriptors, at most %d", lineage.ErrInvalid, n, bpf.MaxHandoffFiles)
	}
	files := make([]*os.File, 0, n)
	for i := range n {
		fd := ControlFD + 1 + i
		target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil || !strings.HasPrefix(target, "anon_inode:bpf") {
			return nil, fmt.Errorf("%w hello: descriptor %d is not a bpf object (%q)", lineage.ErrInvalid, fd, target)
		}
		files = append(files, os.NewFile(uintptr(fd), "lineage-handoff"))
	}
	return files, nil
}
