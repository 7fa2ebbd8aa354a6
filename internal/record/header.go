package record

import (
	"os"
	"runtime/debug"
	"strings"
)

// HostHeader returns a header for a record made on this machine: lineage's
// version (from the build), the host name and the kernel release, and the
// job's command line (redacted by the Writer). What can't be read is left
// empty.
func HostHeader(command []string) Header {
	h := Header{Lineage: Version(), Command: command}
	h.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

// Version is lineage's version as the build recorded it: the module version
// for a released build, else the VCS revision, else "devel".
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}
