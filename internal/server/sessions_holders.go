package server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// holders answers GET /v1/roots/{id}/holders?pipe=INODE,...&socket=INODE,...:
// the live members of the root's lineage that hold one of the pipes, or
// the other end of one of the caller's sockets. A client whose command
// exited while its output stays open asks it to name who keeps it open.
// The caller must be able to see the root's session; the answer names only
// members of that lineage and only their descriptors that are asked about.
// The work is bounded: at most api.MaxHolderPipes pipes and sockets,
// api.MaxHolderMembers members and api.MaxHolderFDs descriptors per member
// are read.
func (s *Server) holders(r *http.Request, p Peer) (int, any, error) {
	id, err := parseIdentityPath(r)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	pipes, err := parseInodes("pipe", q["pipe"])
	if err != nil {
		return 0, nil, err
	}
	sockets, err := parseInodes("socket", q["socket"])
	if err != nil {
		return 0, nil, err
	}
	if err := checkHolderQuery(pipes, sockets); err != nil {
		return 0, nil, err
	}
	_, rt, err := s.findRoot(id, p)
	if err != nil {
		return 0, nil, err
	}
	// want maps each link to look for to the descriptor it is reported as.
	want := make(map[string]api.HeldFD, len(pipes)+len(sockets))
	for _, ino := range pipes {
		want[proc.PipeLink(ino)] = api.HeldFD{Pipe: ino}
	}
	for _, ino := range sockets {
		peer, err := unixPeer(ino)
		if err != nil {
			return 0, nil, err
		}
		want[proc.SocketLink(peer)] = api.HeldFD{Socket: ino}
	}
	live, err := rt.job.Live()
	if err != nil {
		return 0, nil, err
	}
	out := api.Holders{Root: id, Pipes: pipes, Sockets: sockets, Holders: []api.Holder{}}
	out.Holders, out.Scanned, out.Truncated = s.scanHolders(live, want)
	return http.StatusOK, out, nil
}

// scanHolders reads the descriptors of the live members, at most
// api.MaxHolderMembers of them in identity order, for the links in want.
func (s *Server) scanHolders(live []job.Leftover, want map[string]api.HeldFD) (out []api.Holder, scanned int, truncated bool) {
	out = []api.Holder{}
	slices.SortFunc(live, func(a, b job.Leftover) int { return lineage.Compare(a.Identity, b.Identity) })
	links := make(map[string]bool, len(want))
	for l := range want {
		links[l] = true
	}
	for _, l := range live {
		if scanned == api.MaxHolderMembers {
			return out, scanned, true
		}
		scanned++
		fds, cut, err := s.proc.FDLinks(int(l.PID), links, api.MaxHolderFDs)
		truncated = truncated || cut
		// Read first, then checked: the pid may have been reused between
		// the listing and the read, and a stranger's descriptors are not
		// the member's.
		if err != nil || len(fds) == 0 || s.proc.Check(l.Identity) != nil {
			continue
		}
		h := api.Holder{Process: l.Identity, Parent: l.Parent, Comm: l.Comm, Argv: l.Argv, Age: l.Age, FDs: make([]api.HeldFD, len(fds))}
		for i, fd := range fds {
			h.FDs[i] = want[fd.Link]
			h.FDs[i].FD = fd.FD
		}
		out = append(out, h)
	}
	return out, scanned, truncated
}

// parseInodes reads the values of one parameter: inodes, comma-separated,
// in one or more values; duplicates count once.
func parseInodes(name string, values []string) ([]uint64, error) {
	var out []uint64
	for _, v := range values {
		for _, f := range strings.Split(v, ",") {
			ino, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil || ino == 0 {
				return nil, fmt.Errorf("%w %s %q: want an inode, a positive integer", lineage.ErrInvalid, name, f)
			}
			if !slices.Contains(out, ino) {
				out = append(out, ino)
			}
		}
	}
	return out, nil
}

// checkHolderQuery refuses a query that names nothing, or too much.
func checkHolderQuery(pipes, sockets []uint64) error {
	n := len(pipes) + len(sockets)
	if n == 0 {
		return fmt.Errorf("%w holders: give the pipes as ?pipe=INODE,... (the inode of the pipe, as fstat(2) shows it), or your sockets' as ?socket=INODE,...", lineage.ErrInvalid)
	}
	if n > api.MaxHolderPipes {
		return fmt.Errorf("%w holders: %d pipes and sockets, at most %d", lineage.ErrInvalid, n, api.MaxHolderPipes)
	}
	return nil
}
