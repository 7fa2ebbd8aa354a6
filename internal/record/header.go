package record

import (
	"os"
	"strings"

	"github.com/lineage-dev/lineage/internal/buildinfo"
)

// HostHeader returns a header for a record made on this machine: lineage's
// version and build, the host name and the kernel release, and the job's
// command line (redacted by the Writer). What can't be read is left empty.
func HostHeader(command []string) Header {
	b := buildinfo.Get()
	h := Header{Lineage: b.Version, Build: &b, Command: command}
	h.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

// Version is lineage's version as the build recorded it (see
// [buildinfo.Info.Version]).
func Version() string { return buildinfo.Get().Version }
