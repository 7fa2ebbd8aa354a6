package server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/internal/api"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/lineage"
)

// holders answers GET /v1/roots/{id}/holders?pipe=INODE,...: the live
// members of the root's lineage that hold one of the pipes. A client whose
// command exited while its output pipes stay open asks it to name who
// keeps them open. The caller must be able to see the root's session; the
// answer names only members of that lineage and only their descriptors
// that are one of the pipes asked about. The work is bounded: at most
// api.MaxHolderPipes pipes, api.MaxHolderMembers members and
// api.MaxHolderFDs descriptors per member are read.
func (s *Server) holders(r *http.Request, p Peer) (int, any, error) {
	id, err := parseIdentityPath(r)
	if err != nil {
		return 0, nil, err
	}
	pipes, err := parsePipes(r.URL.Query()["pipe"])
	if err != nil {
		return 0, nil, err
	}
	_, rt, err := s.findRoot(id, p)
	if err != nil {
		return 0, nil, err
	}
	live, err := rt.job.Live()
	if err != nil {
		return 0, nil, err
	}
	slices.SortFunc(live, func(a, b job.Leftover) int { return lineage.Compare(a.Identity, b.Identity) })
	want := make(map[uint64]bool, len(pipes))
	for _, ino := range pipes {
		want[ino] = true
	}
	out := api.Holders{Root: id, Pipes: pipes, Holders: []api.Holder{}}
	for _, l := range live {
		if out.Scanned == api.MaxHolderMembers {
			out.Truncated = true
			break
		}
		out.Scanned++
		fds, truncated, err := s.proc.Pipes(int(l.PID), want, api.MaxHolderFDs)
		out.Truncated = out.Truncated || truncated
		// Read first, then checked: the pid may have been reused between
		// the listing and the read, and a stranger's descriptors are not
		// the member's.
		if err != nil || len(fds) == 0 || s.proc.Check(l.Identity) != nil {
			continue
		}
		h := api.Holder{Process: l.Identity, Parent: l.Parent, Comm: l.Comm, Argv: l.Argv, Age: l.Age, FDs: make([]api.HeldFD, len(fds))}
		for i, fd := range fds {
			h.FDs[i] = api.HeldFD{FD: fd.FD, Pipe: fd.Pipe}
		}
		out.Holders = append(out.Holders, h)
	}
	return http.StatusOK, out, nil
}

// parsePipes reads the pipe= values: inodes, comma-separated, in one or
// more values; duplicates count once.
func parsePipes(values []string) ([]uint64, error) {
	var out []uint64
	for _, v := range values {
		for _, f := range strings.Split(v, ",") {
			ino, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil || ino == 0 {
				return nil, fmt.Errorf("%w pipe %q: want a pipe's inode, a positive integer", lineage.ErrInvalid, f)
			}
			if !slices.Contains(out, ino) {
				out = append(out, ino)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w holders: give the pipes as ?pipe=INODE,... (the inode of the pipe, as fstat(2) shows it)", lineage.ErrInvalid)
	}
	if len(out) > api.MaxHolderPipes {
		return nil, fmt.Errorf("%w holders: %d pipes, at most %d", lineage.ErrInvalid, len(out), api.MaxHolderPipes)
	}
	return out, nil
}
