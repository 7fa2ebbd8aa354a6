package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

func parseRun(t *testing.T, args ...string) (*runOptions, error) {
	t.Helper()
	var got *runOptions
	cmd := NewCmdRun(Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, nil, func(o *runOptions) error { got = o; return nil })
	cmd.SetArgs(append(args, "--", "true"))
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return got, err
}

func TestRunMaxMembersIsCappedAtPIDMax(t *testing.T) {
	o, err := parseRun(t, "--max-members", "100000000")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Skip(err)
	}
	var pidMax uint32
	for _, c := range bytes.TrimSpace(b) {
		pidMax = pidMax*10 + uint32(c-'0')
	}
	if o.MaxMembers != pidMax {
		t.Errorf("--max-members 100000000 gave %d, want pid_max %d", o.MaxMembers, pidMax)
	}
}

func TestSafetyFlagsParse(t *testing.T) {
	procRoot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(procRoot, "sys/kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(procRoot, "sys/kernel/pid_max"), []byte("4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		flags   safetyFlags
		max     uint32
		wantMax uint32
		wantErr bool
		groups  bool
	}{
		{"capped", safetyFlags{ReapTimeout: time.Minute}, 100_000_000, 4096, false, false},
		{"below pid_max", safetyFlags{ReapTimeout: time.Minute}, 100, 100, false, false},
		{"zero reap timeout", safetyFlags{}, 100, 100, true, false},
		{"negative reap timeout", safetyFlags{ReapTimeout: -time.Second}, 100, 100, true, false},
		{"user nobody", safetyFlags{ReapTimeout: time.Minute, User: "nobody"}, 100, 100, false, true},
		{"user by number and group", safetyFlags{ReapTimeout: time.Minute, User: "65534:0"}, 100, 100, false, true},
		{"unknown user", safetyFlags{ReapTimeout: time.Minute, User: "no-such-user-here"}, 100, 100, true, false},
		{"unknown group", safetyFlags{ReapTimeout: time.Minute, User: "nobody:no-such-group-here"}, 100, 100, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			max := c.max
			err := c.flags.parse(&max, procRoot)
			if c.wantErr {
				if !errors.Is(err, lineage.ErrInvalid) {
					t.Fatalf("got %v, want an invalid-input error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if max != c.wantMax {
				t.Errorf("max members %d, want %d", max, c.wantMax)
			}
			if c.groups && (c.flags.credential == nil || c.flags.credential.Uid != 65534) {
				t.Errorf("credential %+v, want uid 65534", c.flags.credential)
			}
		})
	}
}

func TestLookupCredentialGroup(t *testing.T) {
	cred, err := lookupCredential("65534:0")
	if err != nil {
		t.Fatal(err)
	}
	if cred.Uid != 65534 || cred.Gid != 0 || cred.Groups == nil {
		t.Errorf("credential %+v", cred)
	}
	cred, err = lookupCredential("4242")
	if err != nil || cred.Uid != 4242 || cred.Gid != 4242 || !slices.Equal(cred.Groups, []uint32{}) {
		t.Errorf("unknown uid: %+v, %v", cred, err)
	}
}

// A start that failed with EPERM while lineage lacks CAP_SETUID or
// CAP_SETGID is --user's failure, lineage's own; any other is the
// command's.
func TestUserRefused(t *testing.T) {
	const setIDs = 1<<loader.CapSetuid | 1<<loader.CapSetgid
	start := func(errno syscall.Errno) *job.StartError {
		return &job.StartError{Code: lineage.ExitCannotRun, Err: fmt.Errorf("run id: %w", &fs.PathError{Op: "fork/exec", Path: "/usr/bin/id", Err: errno})}
	}
	cred := &syscall.Credential{}
	for _, c := range []struct {
		name    string
		cred    *syscall.Credential
		errno   syscall.Errno
		host    loader.Host
		refused bool
	}{
		{"unprivileged", cred, syscall.EPERM, loader.Host{Euid: 65534}, true},
		{"CAP_SETGID alone", cred, syscall.EPERM, loader.Host{Euid: 65534, Caps: 1 << loader.CapSetgid}, true},
		{"CAP_SETUID alone", cred, syscall.EPERM, loader.Host{Euid: 65534, Caps: 1 << loader.CapSetuid}, true},
		{"capabilities", cred, syscall.EPERM, loader.Host{Euid: 65534, Caps: setIDs}, false},
		{"root", cred, syscall.EPERM, loader.Host{Euid: 0, Caps: setIDs}, false},
		{"root, capabilities unknown", cred, syscall.EPERM, loader.Host{Euid: 0, CapsErr: errors.New("capget")}, false},
		{"capabilities unknown", cred, syscall.EPERM, loader.Host{Euid: 65534, CapsErr: errors.New("capget")}, true},
		{"not EPERM", cred, syscall.EACCES, loader.Host{Euid: 65534}, false},
		{"no --user", nil, syscall.EPERM, loader.Host{Euid: 65534}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := safetyFlags{User: "root", credential: c.cred}
			err := s.userRefused(start(c.errno), func() loader.Host { return c.host })
			if !c.refused {
				if err != nil {
					t.Errorf("got %v, want the command's own failure", err)
				}
				return
			}
			if err == nil || !errors.Is(err, syscall.EPERM) || !strings.HasPrefix(err.Error(), `--user "root": `) || !strings.Contains(err.Error(), "needs root, or CAP_SETUID and CAP_SETGID") {
				t.Errorf("got %v, want --user's failure", err)
			}
		})
	}
}

// A setcap install runs commands only as the user who runs it: its
// capabilities are for tracking and reaping, never a way to another uid.
// Root, and a caller whose capabilities are its own, may name anyone.
func TestForeignUserRefusedUnderFileCapabilities(t *testing.T) {
	other := &syscall.Credential{Uid: 0, Gid: 0}
	self := &syscall.Credential{Uid: 65534, Gid: 65534}
	for _, c := range []struct {
		name     string
		cred     *syscall.Credential
		uid, gid int
		byFile   bool
		refused  bool
	}{
		{"setcap install, another user", other, 65534, 65534, true, true},
		{"setcap install, another group", &syscall.Credential{Uid: 65534, Gid: 0}, 65534, 65534, true, true},
		{"setcap install, the caller itself", self, 65534, 65534, true, false},
		{"capabilities of the caller's own", other, 65534, 65534, false, false},
		{"root", self, 0, 0, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := refuseForeignUserUnderFileCaps(c.cred, c.uid, c.gid, c.byFile)
			if got := err != nil; got != c.refused {
				t.Fatalf("refused %v (%v), want %v", got, err, c.refused)
			}
			if c.refused && (!errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "setcap install")) {
				t.Errorf("got %v, want an invalid-input error naming the setcap install", err)
			}
		})
	}
	// This test binary was started without raised privileges.
	if privilegedByFile() {
		t.Error("the test process reads as privileged by its file")
	}
}
