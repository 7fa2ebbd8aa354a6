package cli

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// defaultReapTimeout bounds a reap unless --reap-timeout says otherwise.
const defaultReapTimeout = 5 * time.Minute

// safetyFlags are run's flags for issue 9: bounds under hostile jobs and
// what the user said.
type safetyFlags struct {
	Strict      bool
	ReapTimeout time.Duration
	User        string

	// Parsed by parse.
	credential *syscall.Credential
}

func (s *safetyFlags) add(f *pflag.FlagSet) {
	f.BoolVar(&s.Strict, "strict", false, fmt.Sprintf("exit %d instead of 0 when tracking or reaping was incomplete (processes not tracked, events lost, survivors, refusals)", lineage.ExitIncomplete))
	f.DurationVar(&s.ReapTimeout, "reap-timeout", defaultReapTimeout, "give up a reap after this long: what is still alive is reported as surviving, and lineage exits")
	f.StringVar(&s.User, "user", "", "run the command as `USER[:GROUP]` (name or number), with USER's supplementary groups (needs root, or CAP_SETUID and CAP_SETGID of the caller's own: a setcap install runs commands only as the user who runs it); lineage keeps its own privileges")
}

// parse checks the flags and caps *maxMembers at pid_max, the most
// processes that can exist at once (a bigger map only costs memory);
// procRoot is where pid_max is read.
func (s *safetyFlags) parse(maxMembers *uint32, procRoot string) error {
	if s.ReapTimeout <= 0 {
		return fmt.Errorf("--reap-timeout %v: %w: must be positive", s.ReapTimeout, lineage.ErrInvalid)
	}
	if pidMax, err := proc.PIDMax(procRoot); err == nil && *maxMembers > pidMax && pidMax >= 2 {
		*maxMembers = pidMax
	}
	// --user runs standalone (it is daemon-wide); the user is looked up
	// here all the same, so that a bad one is refused before anything runs.
	if s.User != "" {
		var err error
		if s.credential, err = lookupCredential(s.User); err != nil {
			return fmt.Errorf("--user %q: %w", s.User, err)
		}
		if err := refuseForeignUserUnderFileCaps(s.credential, os.Getuid(), os.Getgid(), privilegedByFile()); err != nil {
			return fmt.Errorf("--user %q: %w", s.User, err)
		}
	}
	return nil
}

// refuseForeignUserUnderFileCaps refuses cred, unless it is the caller's
// own uid and gid, when lineage runs for a user other than root with
// privileges its file gave it (a setcap install): those capabilities are
// the install's, for tracking and reaping, and never let whoever runs
// lineage act as another user, whatever capabilities the file holds.
// Root, and a caller whose capabilities are its own (ambient, inherited),
// may run a command as anyone they could become anyway.
func refuseForeignUserUnderFileCaps(cred *syscall.Credential, uid, gid int, byFile bool) error {
	if uid == 0 || !byFile || cred.Uid == uint32(uid) && cred.Gid == uint32(gid) {
		return nil
	}
	return fmt.Errorf("%w: lineage runs with its file's capabilities (a setcap install) for uid %d, who may run commands only as itself", lineage.ErrInvalid, uid)
}

// atSecure is the auxiliary vector's AT_SECURE (<elf.h>): set by the
// kernel when the exec raised the process's privileges (set-uid, set-gid,
// file capabilities).
const atSecure = 23

// privilegedByFile reports whether this process's exec raised its
// privileges; where the auxiliary vector can't be read, it assumes so.
func privilegedByFile() bool {
	auxv, err := unix.Auxv()
	if err != nil {
		return true
	}
	for _, kv := range auxv {
		if kv[0] == atSecure {
			return kv[1] != 0
		}
	}
	return false
}

// lookupCredential reads USER[:GROUP], each a name or a number. Without a
// group, USER's primary group; supplementary groups are USER's as the
// group database lists them (none for a bare number it doesn't know).
func lookupCredential(spec string) (*syscall.Credential, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	u, err := lookupUser(name)
	if err != nil {
		return nil, err
	}
	cred := &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
	if hasGroup {
		if cred.Gid, err = lookupGroup(group); err != nil {
			return nil, err
		}
	}
	return cred, nil
}

type userIDs struct {
	uid, gid uint32
	groups   []uint32
}

func lookupUser(name string) (userIDs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		id, perr := strconv.ParseUint(name, 10, 32)
		if perr != nil {
			return userIDs{}, fmt.Errorf("%w user: %w", lineage.ErrInvalid, err)
		}
		if u, err = user.LookupId(name); err != nil {
			// A uid the user database doesn't know runs with gid = uid.
			return userIDs{uid: uint32(id), gid: uint32(id), groups: []uint32{}}, nil
		}
	}
	ids := userIDs{groups: []uint32{}}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return userIDs{}, fmt.Errorf("%w user %q: not a numeric uid/gid", lineage.ErrInvalid, name)
	}
	ids.uid, ids.gid = uint32(uid), uint32(gid)
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			ids.groups = append(ids.groups, uint32(n))
		}
	}
	return ids, nil
}

func lookupGroup(name string) (uint32, error) {
	if g, err := user.LookupGroup(name); err == nil {
		name = g.Gid
	}
	n, err := strconv.ParseUint(name, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w group %q: unknown", lineage.ErrInvalid, name)
	}
	return uint32(n), nil
}

// userRefused is the error of a job that could not start because lineage
// may not run it as --user's user: the start failed with EPERM and lineage
// lacks what setting a child's uid, gid and groups takes (root, or
// CAP_SETUID and CAP_SETGID, as host says when called). It is nil for
// every other failure, which is the command's own.
func (s *safetyFlags) userRefused(start *job.StartError, host func() loader.Host) error {
	if s.credential == nil || !errors.Is(start, syscall.EPERM) {
		return nil
	}
	h := host()
	if mayTakeIDs(h) {
		return nil
	}
	return fmt.Errorf("--user %q: running the command as another user needs root, or CAP_SETUID and CAP_SETGID, which lineage (uid %d) lacks: %w", s.User, h.Euid, start.Err)
}

// mayTakeIDs reports whether h may give a child another uid, gid and
// groups: CAP_SETUID and CAP_SETGID; root, when its capabilities could not
// be read.
func mayTakeIDs(h loader.Host) bool {
	if h.CapsErr != nil {
		return h.Euid == 0
	}
	return h.HasCap(loader.CapSetuid) && h.HasCap(loader.CapSetgid)
}

// exitCode is the status `lineage run` exits with for a job that ended so.
func (s *safetyFlags) exitCode(rep *job.Report, end job.End) int {
	code := end.ExitCode()
	if s.Strict {
		return rep.StrictExitCode(code)
	}
	return code
}
