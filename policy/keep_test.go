package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

func TestParseKeep(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String of the rule; "" when parsing must fail
		errPart string
	}{
		{"4242@1234", "4242@1234", ""},
		{"root:4242@1234", "root:4242@1234", ""},
		{"exe:/usr/bin/redis-server", "exe:/usr/bin/redis-server", ""},

		{"", "", "want PID@START, root:PID@START or exe:PATH"},
		{"4242", "", "want PID@START, root:PID@START or exe:PATH"},
		{"redis-server", "", "want PID@START, root:PID@START or exe:PATH"},
		{"pid:4242@1234", "", "bad pid"},
		{"abc@1234", "", "bad pid"},
		{"4242@", "", "bad start time"},
		{"4242@0", "", "missing start time"},
		{"1@1234", "", "pid 0 and 1 can never be tracked"},
		{"root:", "", "want PID@START"},
		{"root:1@5", "", "pid 0 and 1 can never be tracked"},
		{"root:exe:/bin/sh", "", "want PID@START"},
		{"exe:", "", "empty executable path"},
		{"exe:redis-server", "", "not absolute"},
		{"exe:./redis-server", "", "not absolute"},
		{"exe:/usr/bin/../bin/redis-server", "", `not clean (want "/usr/bin/redis-server")`},
		{"exe:/usr/bin//redis-server", "", "not clean"},
		{"exe:/usr/bin/", "", "not clean"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			k, err := ParseKeep(tt.in)
			if tt.want == "" {
				if !errors.Is(err, lineage.ErrInvalid) {
					t.Fatalf("ParseKeep(%q) error = %v, want lineage.ErrInvalid", tt.in, err)
				}
				if !strings.Contains(err.Error(), tt.errPart) || !strings.Contains(err.Error(), "keep rule") {
					t.Errorf("ParseKeep(%q) error %q, want it to name the keep rule and say %q", tt.in, err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeep(%q): %v", tt.in, err)
			}
			if got := k.String(); got != tt.want {
				t.Errorf("ParseKeep(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseKeepIdentityErrorIsBoth(t *testing.T) {
	_, err := ParseKeep("root:x@1")
	if !errors.Is(err, lineage.ErrInvalid) || !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("error %v: want both lineage.ErrInvalid and lineage.ErrInvalid", err)
	}
}

func TestParseKeeps(t *testing.T) {
	rules, err := ParseKeeps([]string{"4242@1234", "exe:/bin/sleep"})
	if err != nil || len(rules) != 2 {
		t.Fatalf("ParseKeeps = %v, %v", rules, err)
	}
	if _, err := ParseKeeps([]string{"4242@1234", "exe:sleep"}); !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "exe:sleep") {
		t.Errorf("ParseKeeps with a bad value: %v, want lineage.ErrInvalid naming it", err)
	}
}

func TestKeepJSON(t *testing.T) {
	in := KeepRules{mustKeep(t, "4242@1234"), mustKeep(t, "root:10@100"), mustKeep(t, "exe:/bin/sh")}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `["4242@1234","root:10@100","exe:/bin/sh"]`; string(b) != want {
		t.Errorf("json %s, want %s", b, want)
	}
	var out KeepRules
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("round trip: %v", out)
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("round trip [%d] = %v, want %v", i, out[i], in[i])
		}
	}
	if err := json.Unmarshal([]byte(`["exe:sh"]`), &out); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("unmarshal a bad rule: %v, want lineage.ErrInvalid", err)
	}
}

func TestKeepSpares(t *testing.T) {
	root := lineage.Identity{PID: 10, StartTicks: 100}
	member := func(pid uint32, start uint64, filename string) lineage.Member {
		return lineage.Member{Identity: lineage.Identity{PID: pid, StartTicks: start}, Root: root, Filename: filename}
	}
	tests := []struct {
		name string
		rule Keep
		m    lineage.Member
		want bool
	}{
		{"identity: same", mustKeep(t, "20@200"), member(20, 200, ""), true},
		{"identity: reused pid", mustKeep(t, "20@200"), member(20, 201, ""), false},
		{"identity: another", mustKeep(t, "20@200"), member(21, 200, ""), false},
		{"identity: not its children", mustKeep(t, "10@100"), member(20, 200, ""), false},
		{"identity: the root process", mustKeep(t, "10@100"), lineage.Member{Identity: root, Root: root}, true},
		{"root: the root", mustKeep(t, "root:10@100"), lineage.Member{Identity: root}, true},
		{"root: a member", mustKeep(t, "root:10@100"), member(20, 200, ""), true},
		{"root: a member of another root", mustKeep(t, "root:11@100"), member(20, 200, ""), false},
		{"root: same pid, other start", mustKeep(t, "root:10@101"), member(20, 200, ""), false},
		{"exe: exact", mustKeep(t, "exe:/usr/bin/redis-server"), member(20, 200, "/usr/bin/redis-server"), true},
		{"exe: doubled slash", mustKeep(t, "exe:/usr/bin/redis-server"), member(20, 200, "/usr/bin//redis-server"), true},
		{"exe: other program", mustKeep(t, "exe:/usr/bin/redis-server"), member(20, 200, "/usr/bin/redis-cli"), false},
		{"exe: prefix only", mustKeep(t, "exe:/usr/bin/redis"), member(20, 200, "/usr/bin/redis-server"), false},
		{"exe: relative filename", mustKeep(t, "exe:/usr/bin/redis-server"), member(20, 200, "redis-server"), false},
		{"exe: never exec'd", mustKeep(t, "exe:/usr/bin/redis-server"), member(20, 200, ""), false},
		{"exe: symlink path is not resolved", mustKeep(t, "exe:/usr/bin/python3.11"), member(20, 200, "/usr/bin/python3"), false},
		{"zero rule", Keep{}, member(20, 200, ""), false},
		{"zero rule, zero member", Keep{}, lineage.Member{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rule.Spares(tt.m); got != tt.want {
				t.Errorf("%q.Spares(%+v) = %v, want %v", tt.rule, tt.m, got, tt.want)
			}
		})
	}
}

func TestKeepRules(t *testing.T) {
	root := lineage.Identity{PID: 10, StartTicks: 100}
	rules := KeepRules{mustKeep(t, "exe:/bin/sh"), mustKeep(t, "10@100"), mustKeep(t, "root:11@100")}
	if rules.KeepsRoot(root) {
		t.Error("an identity rule for the root must not keep its whole lineage")
	}
	if !rules.KeepsRoot(lineage.Identity{PID: 11, StartTicks: 100}) {
		t.Error("a root rule must keep its root")
	}
	if KeepRules(nil).KeepsRoot(root) {
		t.Error("no rules keep nothing")
	}
	k, ok := rules.Spares(lineage.Member{Identity: lineage.Identity{PID: 12, StartTicks: 5}, Root: root, Filename: "/bin/sh"})
	if !ok || k.String() != "exe:/bin/sh" {
		t.Errorf("Spares = %v, %v; want exe:/bin/sh", k, ok)
	}
	if _, ok := KeepRules(nil).Spares(lineage.Member{Identity: root}); ok {
		t.Error("no rules spare nothing")
	}
}

func TestKeepConstructors(t *testing.T) {
	if _, err := KeepIdentity(lineage.Identity{PID: 1, StartTicks: 5}); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("KeepIdentity(pid 1) = %v, want lineage.ErrInvalid", err)
	}
	if _, err := KeepRoot(lineage.Identity{PID: 5}); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("KeepRoot(no start) = %v, want lineage.ErrInvalid", err)
	}
	if k, err := KeepExe("/bin/sh"); err != nil || k.String() != "exe:/bin/sh" {
		t.Errorf("KeepExe(/bin/sh) = %v, %v", k, err)
	}
}

func mustKeep(tb testing.TB, s string) Keep {
	tb.Helper()
	k, err := ParseKeep(s)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// fakeResolver resolves two programs: /usr/bin/python3, a symlink to
// /usr/bin/python3.11, and /opt/tool.
func fakeResolver(p string) (string, lineage.FileID, error) {
	switch p {
	case "/usr/bin/python3":
		return "/usr/bin/python3.11", lineage.FileID{Dev: lineage.KernelDev(8, 1), Ino: 311}, nil
	case "/opt/tool":
		return "/opt/tool", lineage.FileID{Dev: lineage.KernelDev(8, 1), Ino: 7}, nil
	}
	return "", lineage.FileID{}, errors.New(p + ": no such file")
}

func TestKeepExeMatchesTheProgramAsUsersNameIt(t *testing.T) {
	rules, err := ParseKeeps([]string{"exe:/usr/bin/python3", "exe:/opt/tool", "exe:/not/there/yet"})
	if err != nil {
		t.Fatal(err)
	}
	// A program not there yet is refused, and said; the others resolve.
	rules, err = rules.ResolveExe(fakeResolver)
	if !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "keep rule exe:/not/there/yet: /not/there/yet: no such file") {
		t.Errorf("ResolveExe: %v, want the missing program refused by name", err)
	}
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"/usr/bin/python3.11"}, "exe:/usr/bin/python3"},
		{[]string{"/usr/bin/python3"}, "exe:/usr/bin/python3"},
		{[]string{"", "/usr/bin/python3.11 (deleted)"}, "exe:/usr/bin/python3"},
		{[]string{"/opt/tool (deleted)"}, "exe:/opt/tool"},
		{[]string{"/not/there/yet"}, "exe:/not/there/yet"},
		{[]string{"/usr/bin/python3.12"}, ""},
		{[]string{"python3"}, ""},
		{[]string{"/usr/bin/python3 (deleted) (deleted)"}, ""},
		{nil, ""},
	} {
		got := ""
		for _, k := range rules {
			if k.SparesExe(c.names...) {
				got = k.String()
				break
			}
		}
		if got != c.want {
			t.Errorf("names %q: spared by %q, want %q", c.names, got, c.want)
		}
	}
	// A member's recorded exec filename goes through Spares the same way.
	m := lineage.Member{Identity: lineage.Identity{PID: 9, StartTicks: 9}, Filename: "/usr/bin/python3.11 (deleted)"}
	if _, ok := rules.Spares(m); !ok {
		t.Error("Spares ignores the resolved path")
	}
	// Resolving doesn't change the text form, and never adds victims to
	// other kinds of rules.
	if rules[0].String() != "exe:/usr/bin/python3" {
		t.Errorf("text form %q", rules[0])
	}
	id, _ := ParseKeep("5@5")
	if got, err := (KeepRules{id}).ResolveExe(fakeResolver); err != nil || got[0] != id {
		t.Errorf("ResolveExe changed an identity rule: %v, %v", got, err)
	}
}

func TestResolvedExeRulesNameTheirFileToTheKernel(t *testing.T) {
	rules, err := ParseKeeps([]string{"exe:/usr/bin/python3", "exe:/opt/tool", "root:5@5"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rules {
		if f, ok := k.File(); ok {
			t.Errorf("%s names file %v before it is resolved", k, f)
		}
	}
	rules, err = rules.ResolveExe(fakeResolver)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []lineage.FileID{{Dev: 8<<20 | 1, Ino: 311}, {Dev: 8<<20 | 1, Ino: 7}, {}} {
		got, ok := rules[i].File()
		if got != want || ok != !want.IsZero() {
			t.Errorf("%s: file %v, %v; want %v", rules[i], got, ok, want)
		}
	}
	if exe, ok := rules[0].Exe(); !ok || exe != "/usr/bin/python3" {
		t.Errorf("Exe() = %q, %v: want the path as given", exe, ok)
	}
	if _, ok := rules[2].Exe(); ok {
		t.Error("a root rule says it names a program")
	}
	// Resolved or not, a rule keeps its text form (the API's name for it).
	if rules[0].String() != "exe:/usr/bin/python3" {
		t.Errorf("text form %q", rules[0])
	}
}
