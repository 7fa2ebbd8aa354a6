package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// hostProg is one BPF program loaded on the host, as `bpftool prog show
// --json` lists it.
type hostProg struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	Tag  string `json:"tag"`
}

// hostProgs lists the programs loaded on the host, by id.
func hostProgs(t *testing.T, bpftool string) map[uint32]hostProg {
	t.Helper()
	out, err := exec.Command(bpftool, "prog", "show", "--json").Output()
	if err != nil {
		t.Fatalf("bpftool prog show: %v", err)
	}
	var progs []hostProg
	if err := json.Unmarshal(out, &progs); err != nil {
		t.Fatalf("bpftool prog show: %v", err)
	}
	m := make(map[uint32]hostProg, len(progs))
	for _, p := range progs {
		m[p.ID] = p
	}
	return m
}

// pinnedProgs returns the ids of the programs the links pinned under a
// daemon's pin root run (`bpftool link show pinned`): the daemon's copy of
// lineage's programs.
func pinnedProgs(t *testing.T, bpftool, pinRoot string) []uint32 {
	t.Helper()
	links, err := filepath.Glob(filepath.Join(pinRoot, fmt.Sprintf("v%d", bpf.LayoutVersion), "link_*"))
	if err != nil || len(links) == 0 {
		t.Fatalf("no pinned links under %s (%v)", pinRoot, err)
	}
	var ids []uint32
	for _, l := range links {
		out, err := exec.Command(bpftool, "link", "show", "pinned", l, "--json").Output()
		if err != nil {
			t.Fatalf("bpftool link show pinned %s: %v", l, err)
		}
		var link struct {
			ProgID uint32 `json:"prog_id"`
		}
		if err := json.Unmarshal(out, &link); err != nil || link.ProgID == 0 {
			t.Fatalf("bpftool link show pinned %s: %v: %s", l, err, out)
		}
		ids = append(ids, link.ProgID)
	}
	return ids
}

// heldProgs returns the ids of the programs that process pid holds open,
// directly or through a link (fdinfo's prog_id).
func heldProgs(pid int) map[uint32]bool {
	held := map[uint32]bool{}
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	fds, _ := os.ReadDir(dir)
	for _, fd := range fds {
		data, err := os.ReadFile(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "prog_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					held[uint32(id)] = true
				}
			}
		}
	}
	return held
}

// processTree returns pid and its live descendants, from one scan of /proc.
func processTree(pid int) []int {
	kids := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		// After the command: state, then the parent's pid.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			kids[pp] = append(kids[pp], p)
		}
	}
	out := []int{pid}
	seen := map[int]bool{pid: true}
	for i := 0; i < len(out); i++ {
		for _, k := range kids[out[i]] {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// lineageCopies returns the programs on the host that are copies of
// lineage's: named as one of the daemon's (mine) is. The name, not the tag:
// another variant or another build of the program is a copy too.
func lineageCopies(progs map[uint32]hostProg, mine []uint32) map[uint32]hostProg {
	names := map[string]bool{}
	for _, id := range mine {
		names[progs[id].Name] = true
	}
	out := map[uint32]hostProg{}
	for id, p := range progs {
		if names[p.Name] {
			out[id] = p
		}
	}
	return out
}

// copiesHeld returns the copies of lineage's programs that the processes
// of pid's tree hold open.
func copiesHeld(pid int, copies map[uint32]hostProg) map[uint32]bool {
	held := map[uint32]bool{}
	for _, p := range processTree(pid) {
		for id := range heldProgs(p) {
			if _, ok := copies[id]; ok {
				held[id] = true
			}
		}
	}
	return held
}

// checkDaemonProgs checks that the daemon's pinned links run one program
// of each name, all loaded on the host, and returns their ids.
func checkDaemonProgs(t *testing.T, bpftool string, d *daemon, progs map[uint32]hostProg) []uint32 {
	t.Helper()
	mine := pinnedProgs(t, bpftool, d.pin)
	names := map[string]bool{}
	for _, id := range mine {
		p, ok := progs[id]
		if !ok || names[p.Name] {
			t.Fatalf("the daemon's pinned program %d is %+v (loaded: %v), names so far %v", id, p, ok, names)
		}
		names[p.Name] = true
	}
	if len(mine) != 3 {
		t.Fatalf("the daemon's pinned links run %d programs, want lineage's 3", len(mine))
	}
	return mine
}

// checkOneCopy checks, while the runs cmds are live, that the host's
// copies of lineage's programs include the daemon's (mine) and none that a
// run's processes hold, and that a standalone run beside them is seen
// holding its own.
func checkOneCopy(t *testing.T, bpftool string, d *daemon, before map[uint32]hostProg, mine []uint32, cmds []*exec.Cmd, mark string) {
	t.Helper()
	during := hostProgs(t, bpftool)
	copies := lineageCopies(during, mine)
	for _, id := range mine {
		if _, ok := copies[id]; !ok {
			t.Errorf("the daemon's program %d is gone from bpftool's list", id)
		}
	}
	for _, cmd := range cmds {
		if held := copiesHeld(cmd.Process.Pid, copies); len(held) != 0 {
			t.Errorf("lineage run %d (or its job) holds copies %v of lineage's programs", cmd.Process.Pid, held)
		}
	}
	others := 0
	for id := range copies {
		if _, old := before[id]; !old {
			others++
		}
	}
	t.Logf("during the %d runs the host has %d copies of lineage's programs: the daemon's %d, %d loaded before the runs, %d loaded meanwhile by others (tests in parallel)",
		len(cmds), len(copies), len(mine), len(copies)-others-len(mine), others)

	ctl := startUntilReadyWith(t, func(*exec.Cmd) {}, "run", "--standalone", "--grace", "1s", "--", "sh", "-c", "echo ready; sleep "+testutil.Sleep(mark))
	defer func() {
		_ = ctl.Process.Signal(syscall.SIGTERM)
		_ = ctl.Wait()
	}()
	if held := copiesHeld(ctl.Process.Pid, lineageCopies(hostProgs(t, bpftool), mine)); len(held) < len(mine) {
		t.Errorf("a standalone run holds %d copies of lineage's programs, want its own %d: the check can't see copies", len(held), len(mine))
	}
}
