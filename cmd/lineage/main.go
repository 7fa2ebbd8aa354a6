// Command lineage tracks every process a command starts, however it tries to
// leave, and ends them when the command's time is up. This is the front:
// the client commands of `lineage serve`, `lineage exec` and `lineage run`
// through the daemon. It links no BPF loader, /proc library or metrics, so
// it starts fast and small; for serve, doctor, report and a standalone run
// it execve(2)s lineage-tracker, beside its own executable.
package main

import (
	"os"

	"github.com/lineage-dev/lineage/internal/cli"
)

func main() {
	cli.StartProfiles()
	code := execute(os.Args[1:])
	cli.StopProfiles()
	os.Exit(code)
}
