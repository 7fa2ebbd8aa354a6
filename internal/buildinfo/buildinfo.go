// Package buildinfo says which lineage this is: its version and commit, the
// Go that built it, and a digest of the BPF objects embedded in it. Every
// report, record header and the build-info metric carry the same [Info], so
// a result can be traced to the binary that produced it.
//
// The version and commit come from the linker (the Makefile sets them with
// -ldflags -X from `git describe --always --dirty`), else from the VCS
// settings the Go toolchain stamps into the build, else they read "devel"
// and "". The BPF digest is over the objects registered with [AddBPFObject]
// (package loader/bpf registers the ones it embeds); a binary without them
// (the front, which links no BPF tracker) reports [CommittedBPF], the
// digest of the objects committed in the same tree, which `go generate`
// writes and a loader/bpf test keeps equal to the embedded ones. The package is safe for concurrent use once init
// is over.
package buildinfo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
)

// Set by the linker: -X github.com/lineage-dev/lineage/internal/buildinfo.version=...
var (
	version string
	commit  string
)

// Info is what a build says about itself. Its JSON form is part of the
// report and record schemas: fields are added, never renamed.
type Info struct {
	// Version is `git describe --always --dirty` at build time, the module
	// version of a released build, or "devel".
	Version string `json:"version"`
	// Commit is the VCS revision the build was made from, when known.
	Commit string `json:"commit,omitempty"`
	// Go is the Go release that built the binary.
	Go string `json:"go"`
	// Arch is the architecture the binary was built for, in Go's words
	// (GOARCH: amd64, arm64).
	Arch string `json:"arch"`
	// BPF is a short digest (12 hex digits of a SHA-256) of the embedded
	// BPF objects, or of the committed ones in a binary that embeds none.
	BPF string `json:"bpf,omitempty"`
}

// String is the one-line form: "VERSION (commit C, go G, arch A, bpf B)",
// leaving out what is unknown.
func (i Info) String() string {
	parts := []string{}
	if i.Commit != "" {
		parts = append(parts, "commit "+i.Commit)
	}
	parts = append(parts, i.Go)
	if i.Arch != "" {
		parts = append(parts, "arch "+i.Arch)
	}
	if i.BPF != "" {
		parts = append(parts, "bpf "+i.BPF)
	}
	return i.Version + " (" + strings.Join(parts, ", ") + ")"
}

var (
	mu      sync.Mutex
	objects = map[string][]byte{}
	cached  *Info
)

// AddBPFObject registers an embedded BPF object by name, for the digest.
// Call it from an init function: what is added after the first [Get] is
// not counted.
func AddBPFObject(name string, obj []byte) {
	mu.Lock()
	defer mu.Unlock()
	objects[name] = obj
}

// Get returns this binary's build information. It is computed once.
func Get() Info {
	mu.Lock()
	defer mu.Unlock()
	if cached == nil {
		i := Info{Version: version, Commit: commit, Go: runtime.Version(), Arch: runtime.GOARCH, BPF: digest(objects)}
		if i.BPF == "" {
			i.BPF = CommittedBPF
		}
		if bi, ok := debug.ReadBuildInfo(); ok {
			fillFromBuild(&i, bi)
		}
		if i.Version == "" {
			i.Version = "devel"
		}
		cached = &i
	}
	return *cached
}

// fillFromBuild fills what the linker did not set from the toolchain's
// stamps: the module version of a released build, else the VCS revision.
func fillFromBuild(i *Info, bi *debug.BuildInfo) {
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Commit == "" {
		i.Commit = rev
	}
	if i.Version != "" {
		return
	}
	switch {
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		i.Version = bi.Main.Version
	case rev != "":
		i.Version = "devel-" + rev
		if dirty {
			i.Version += "-dirty"
		}
	}
}

// Digest is the digest [Get] reports for objs, by name: the loader's test
// checks [CommittedBPF] with it.
func Digest(objs map[string][]byte) string { return digest(objs) }

// digest hashes the objects in name order, each as its name, a zero byte,
// its length and its bytes, and keeps 12 hex digits.
func digest(objs map[string][]byte) string {
	if len(objs) == 0 {
		return ""
	}
	names := make([]string, 0, len(objs))
	for n := range objs {
		names = append(names, n)
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(objs[n]))))
		h.Write(objs[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
