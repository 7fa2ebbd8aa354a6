package bpf

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// runSupervisorOf loads the tracker, spawns a job that asks to die with its
// supervisor, prints "spared PID START" and "member PID START" lines and
// "ready", and waits to be killed.
//
//   - spare-supervisor: a shell with two sleepers; the first is spared.
//   - leader-supervisor: a process whose leader thread has exited while
//     another thread runs on.
//   - uid-supervisor: lineage as if a setcap install run by uid 65534 (the
//     kernel's kills bounded by that user), with a shell and two
//     sleepers, one of them uid 65534's: what 65534 could not signal by
//     kill(2), the shell and the other sleeper, is "spared".
func runSupervisorOf(mode, sleepArg string) int {
	opts := &Options{Variant: loader.Variant(os.Getenv(helperVariantEnv))}
	if mode == "uid-supervisor" {
		opts.KillUser = &policy.KillUser{Real: nobodyUID, Effective: nobodyUID}
	}
	b, err := Open(opts)
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	var cmd *exec.Cmd
	switch mode {
	case "spare-supervisor":
		cmd = exec.Command("sh", "-c", fmt.Sprintf("sleep %[1]s & sleep %[1]s & wait", sleepArg))
	case "uid-supervisor":
		cmd = exec.Command("sh", "-c", fmt.Sprintf("%[1]s sleep %[2]s & sleep %[2]s & wait", asNobody, sleepArg))
	default:
		cmd = helperCmd("leader-exit-long", sleepArg)
	}
	root, err := b.Spawn(cmd, loader.RootOptions{DieWithSupervisor: true})
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	go func() { _ = cmd.Wait() }()
	ready := func() bool {
		if mode == "leader-supervisor" {
			st, err := b.proc.Stat(int(root.PID))
			return err == nil && st.State == "Z" && st.Threads > 1
		}
		return len(sleeperPIDs(sleepArg)) == 2
	}
	for i := 0; i < 500 && !ready(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !ready() {
		fmt.Println("error job never got ready")
		return 1
	}
	switch mode {
	case "spare-supervisor":
		if err := spareFirstSleeper(b, root, sleepArg); err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
	case "uid-supervisor":
		if err := printByUID(b, root); err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
	default:
		fmt.Printf("member %d %d\n", root.PID, root.StartTicks)
	}
	fmt.Println("ready")
	time.Sleep(60 * time.Second)
	runtime.KeepAlive(b)
	return 0
}

// spareFirstSleeper spares one sleeper of root's and prints every member.
func spareFirstSleeper(b *Tracker, root lineage.Identity, sleepArg string) error {
	ms, err := b.Members(root)
	if err != nil {
		return err
	}
	sleeping := sleeperPIDs(sleepArg)
	spared := false
	for _, m := range ms {
		if !spared && sleeping[int(m.PID)] {
			if err := b.Spare(m.Identity); err != nil {
				return err
			}
			spared = true
			fmt.Printf("spared %d %d\n", m.PID, m.StartTicks)
			continue
		}
		fmt.Printf("member %d %d\n", m.PID, m.StartTicks)
	}
	if !spared {
		return fmt.Errorf("no sleeper to spare")
	}
	return nil
}

// nobodyUID is the user the uid tests bound the kernel's kills by, and
// asNobody the command prefix that runs a program as that user.
const (
	nobodyUID = 65534
	asNobody  = "setpriv --reuid 65534 --regid 65534 --clear-groups"
)

// printByUID prints every member of root's as "member" when uid 65534
// could signal it by kill(2), else as "spared".
func printByUID(b *Tracker, root lineage.Identity) error {
	ms, err := b.Members(root)
	if err != nil {
		return err
	}
	for _, m := range ms {
		uid, err := b.proc.UIDs(int(m.PID))
		if err != nil {
			return err
		}
		kind := "spared"
		if uid.Real == nobodyUID || uid.Saved == nobodyUID {
			kind = "member"
		}
		fmt.Printf("%s %d %d\n", kind, m.PID, m.StartTicks)
	}
	return nil
}
