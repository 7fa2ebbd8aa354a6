package loader

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// runSupervisorOf loads the tracker, spawns a job that asks to die with its
// supervisor, prints "spared PID START" and "member PID START" lines and
// "ready", and waits to be killed.
//
//   - spare-supervisor: a shell with two sleepers; the first is spared.
//   - leader-supervisor: a process whose leader thread has exited while
//     another thread runs on.
func runSupervisorOf(mode, sleepArg string) int {
	b, err := OpenBPF(&BPFOptions{Variant: Variant(os.Getenv(helperVariantEnv))})
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	var cmd *exec.Cmd
	if mode == "spare-supervisor" {
		cmd = exec.Command("sh", "-c", fmt.Sprintf("sleep %[1]s & sleep %[1]s & wait", sleepArg))
	} else {
		cmd = helperCmd("leader-exit-long", sleepArg)
	}
	root, err := b.Spawn(cmd, RootOptions{DieWithSupervisor: true})
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
	if mode == "spare-supervisor" {
		if err := spareFirstSleeper(b, root, sleepArg); err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
	} else {
		fmt.Printf("member %d %d\n", root.PID, root.StartTicks)
	}
	fmt.Println("ready")
	time.Sleep(60 * time.Second)
	runtime.KeepAlive(b)
	return 0
}

// spareFirstSleeper spares one sleeper of root's and prints every member.
func spareFirstSleeper(b *BPF, root lineage.Identity, sleepArg string) error {
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
