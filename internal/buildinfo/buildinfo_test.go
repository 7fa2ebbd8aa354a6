package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDigestDependsOnEveryByteAndName(t *testing.T) {
	a := digest(map[string][]byte{"x": []byte("abc"), "y": []byte("def")})
	if len(a) != 12 {
		t.Fatalf("digest %q: want 12 hex digits", a)
	}
	for name, other := range map[string]map[string][]byte{
		"changed byte": {"x": []byte("abd"), "y": []byte("def")},
		"renamed":      {"z": []byte("abc"), "y": []byte("def")},
		"moved byte":   {"x": []byte("ab"), "y": []byte("cdef")},
		"one fewer":    {"x": []byte("abc")},
	} {
		if b := digest(other); b == a {
			t.Errorf("%s: digest unchanged (%s)", name, b)
		}
	}
	if again := digest(map[string][]byte{"y": []byte("def"), "x": []byte("abc")}); again != a {
		t.Errorf("digest depends on map order: %s vs %s", again, a)
	}
	if d := digest(nil); d != "" {
		t.Errorf("no objects: digest %q, want empty", d)
	}
}

func TestFillFromBuild(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name         string
		linked       Info
		bi           debug.BuildInfo
		version, rev string
	}{
		{"linker wins", Info{Version: "v1.2-3-gabc", Commit: "abc"}, debug.BuildInfo{Settings: vcs}, "v1.2-3-gabc", "abc"},
		{"vcs stamps", Info{}, debug.BuildInfo{Settings: vcs}, "devel-0123456789ab-dirty", "0123456789ab"},
		{"module version", Info{}, debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0", ""},
		{"nothing known", Info{}, debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", ""},
	} {
		i := c.linked
		fillFromBuild(&i, &c.bi)
		if i.Version != c.version || i.Commit != c.rev {
			t.Errorf("%s: got version %q commit %q, want %q %q", c.name, i.Version, i.Commit, c.version, c.rev)
		}
	}
}

func TestGet(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Go != runtime.Version() || i.Arch != runtime.GOARCH {
		t.Fatalf("Get() = %+v: want a version, Go %s and arch %s", i, runtime.Version(), runtime.GOARCH)
	}
	s := i.String()
	if !strings.HasPrefix(s, i.Version+" (") || !strings.Contains(s, i.Go) || !strings.Contains(s, ", arch "+runtime.GOARCH) {
		t.Errorf("String() = %q", s)
	}
}

func TestStringNamesWhatIsKnown(t *testing.T) {
	for _, c := range []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.2.3", Commit: "abc", Go: "go1.26.8", Arch: "arm64", BPF: "0123456789ab"}, "v1.2.3 (commit abc, go1.26.8, arch arm64, bpf 0123456789ab)"},
		{Info{Version: "devel", Go: "go1.26.8", Arch: "amd64"}, "devel (go1.26.8, arch amd64)"},
		{Info{Version: "devel", Go: "go1.26.8"}, "devel (go1.26.8)"},
	} {
		if got := c.info.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.info, got, c.want)
		}
	}
}
