package guardian

import (
	"fmt"
	"os"

	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// source is the lineage as the guardian knows it: the kernel's map (bpf)
// or the identities lineage streamed (proc). Used from one goroutine.
type source interface {
	// Members lists the live members, as reap.Source.
	Members() ([]lineage.Member, error)
	// setRoot names the job, once; add learns of a member after it
	// (proc; the bpf source refuses it).
	setRoot(root lineage.Identity)
	add(id lineage.Identity) error
	// contain keeps the lineage from growing where the kernel can; ""
	// with no error means it can't, and the reaper stops the set itself.
	contain() (lineage.Containment, error)
	// spare marks a member the rules spare, before contain, so that the
	// kernel's containment spares it too (bpf; nothing to do for proc).
	spare(id lineage.Identity) error
	close()
}

func openSource(h *hello, files func(int) ([]*os.File, error)) (source, error) {
	if h.Backend == backendProc {
		fs, err := proc.Open("/proc")
		if err != nil {
			return nil, err
		}
		return &procSource{fs: fs, known: make(map[lineage.Identity]lineage.Identity)}, nil
	}
	fds, err := files(h.Files)
	if err != nil {
		return nil, err
	}
	ho, err := bpf.OpenHandoff(fds, h.Containment)
	if err != nil {
		return nil, err
	}
	return &bpfSource{h: ho}, nil
}

// bpfSource reads the membership the kernel keeps.
type bpfSource struct {
	h    *bpf.Handoff
	root lineage.Identity
}

func (s *bpfSource) setRoot(root lineage.Identity) { s.root = root }

func (s *bpfSource) Members() ([]lineage.Member, error) { return s.h.Members(s.root) }

func (s *bpfSource) add(id lineage.Identity) error {
	return fmt.Errorf("%w message: member %s: the bpf backend streams no members", lineage.ErrInvalid, id)
}

func (s *bpfSource) contain() (lineage.Containment, error) { return s.h.Contain(s.root) }

func (s *bpfSource) spare(id lineage.Identity) error { return s.h.Spare(id) }

func (s *bpfSource) close() { _ = s.h.Close() }

// procSource is the members lineage streamed, plus, when asked, their
// descendants by parent pid in /proc: what they forked after lineage's last
// look. A member whose orphan was reparented away before that is out of
// its reach, as it is of the proc backend's.
type procSource struct {
	fs    proc.FS
	root  lineage.Identity
	known map[lineage.Identity]lineage.Identity // member → parent, if known
}

func (s *procSource) setRoot(root lineage.Identity) {
	s.root = root
	s.known[root] = lineage.Identity{}
}

func (s *procSource) add(id lineage.Identity) error {
	if _, ok := s.known[id]; !ok {
		s.known[id] = lineage.Identity{}
	}
	return nil
}

func (s *procSource) contain() (lineage.Containment, error) { return "", nil }

func (s *procSource) spare(lineage.Identity) error { return nil }

func (s *procSource) close() {}

func (s *procSource) Members() ([]lineage.Member, error) {
	isKnown := func(id lineage.Identity) bool { _, ok := s.known[id]; return ok }
	if _, err := s.fs.Adopt(s.root, isKnown, func(child lineage.Stat, parent lineage.Identity) error {
		s.known[child.Identity] = parent
		return nil
	}); err != nil {
		return nil, err
	}
	var out []lineage.Member
	for id, parent := range s.known {
		if s.fs.Check(id) != nil {
			delete(s.known, id)
			continue
		}
		out = append(out, lineage.Member{Identity: id, Parent: parent, Root: s.root})
	}
	return out, nil
}
