package poll

import (
	"github.com/lineage-dev/lineage/lineage"
)

// What a scan keeps open, and how it checks the parent of a new child.
//
// A scan keeps open the stat files of the members and of the candidates
// (the processes whose parent is a member or this process): each open file
// holds a page of kernel memory, so the rest of the host is read with open,
// pread and close. A non-member's stat must be read all the same: only its
// ppid says whether it is a candidate.
//
// A scan is not atomic: member M is read, M dies, a stranger takes its pid
// and forks C, and C reads as M's child. So after the scan, the parent of
// each new child is read once more, through the stat file kept open for it
// where there is one: if M is gone by then, its pid may have named a
// stranger when C was read, and C is judged again at the next scan
// (procScan.parentLost). A zombie M still holds its pid, so its children
// read during the scan were its own.

// scanSet is what the poller knows of the members during one scan.
type scanSet struct {
	// members maps each member's pid to its start time, as of the scan's
	// start.
	members map[int]uint64
	// children maps a member's pid to the pids of the processes this scan
	// read as its children that are not members yet.
	children map[int][]int
	self     int
}

func newScanSet() *scanSet {
	return &scanSet{members: make(map[int]uint64), children: make(map[int][]int)}
}

// begin records the members before a scan. Callers hold scanMu, so that no
// member is added during the scan.
func (p *Poller) beginScanSet() {
	s := p.scanSet
	clear(s.members)
	clear(s.children)
	p.mu.Lock()
	for pid, m := range p.track.members {
		s.members[int(pid)] = m.StartTicks
	}
	s.self = int(p.track.self.PID)
	p.mu.Unlock()
}

// keepOpen says whether the scan keeps st's stat file open: a member's, or
// a candidate's.
func (s *scanSet) keepOpen(st lineage.Stat) bool {
	if start, ok := s.members[int(st.PID)]; ok && start == st.StartTicks {
		return true
	}
	_, ok := s.members[st.PPID]
	return ok || st.PPID == s.self
}

// read notes st, read by the scan, when it is a new child of a member.
func (s *scanSet) read(st lineage.Stat) {
	if start, ok := s.members[int(st.PID)]; ok && start == st.StartTicks {
		return
	}
	if _, ok := s.members[st.PPID]; ok {
		s.children[st.PPID] = append(s.children[st.PPID], int(st.PID))
	}
}

// checkParents reads each parent of a new child once more, through the
// stat file kept open for it (or afresh), and marks in cur the children of
// a parent no longer there. A parent read again alive with its start time
// was alive throughout: a pid never comes back to a process that left it.
// Callers hold scanMu.
func (p *Poller) checkParents() {
	for ppid, kids := range p.scanSet.children {
		st, err := p.reader.Stat(ppid)
		if err == nil && st.StartTicks == p.scanSet.members[ppid] {
			continue
		}
		for _, pid := range kids {
			p.cur.parentLost[pid] = true
		}
	}
}
