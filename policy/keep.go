package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/lineage-dev/lineage/lineage"
)

type keepBy uint8

const (
	keepIdentity keepBy = iota + 1
	keepRoot
	keepExe
)

// Keep is one explicit request to spare processes from a reap: one process
// by identity, a whole lineage by its root, or every member that ran an
// executable. A Keep is a predicate over members ([Keep.Spares]); it can take
// a process out of the victims, never add one. The zero Keep spares nothing.
//
// Build one with [ParseKeep], [KeepIdentity], [KeepRoot] or [KeepExe]. Its
// text form, which [ParseKeep] and [Keep.UnmarshalText] read and
// [Keep.String] writes, is one of:
//
//	PID@START         the process with that identity
//	root:PID@START    every member of that root's lineage, the root included
//	exe:PATH          every member whose last exec ran PATH
type Keep struct {
	by  keepBy
	id  lineage.Identity
	exe string
	// resolved is exe with its symlinks resolved, when that differs, and
	// file the program as the kernel knows it, when it was resolved (see
	// [KeepRules.ResolveExe]).
	resolved string
	file     lineage.FileID
}

// KeepIdentity spares the one process id. It fails, wrapping [lineage.ErrInvalid],
// when id could never be a member.
func KeepIdentity(id lineage.Identity) (Keep, error) {
	if err := id.Validate(); err != nil {
		return Keep{}, fmt.Errorf("keep rule: %w", err)
	}
	return Keep{by: keepIdentity, id: id}, nil
}

// KeepRoot spares root and every member of its lineage. It fails, wrapping
// [lineage.ErrInvalid], when root could never be a member.
func KeepRoot(root lineage.Identity) (Keep, error) {
	if err := root.Validate(); err != nil {
		return Keep{}, fmt.Errorf("keep rule: %w", err)
	}
	return Keep{by: keepRoot, id: root}, nil
}

// KeepExe spares every member whose program is exe (as for
// `lineage run --keep exe:PATH`). exe must be absolute and clean. It is
// compared as a string, a " (deleted)" suffix ignored, with each path the
// caller knows for a member's program ([Keep.SparesExe]): the filename its
// exec named, /proc/PID/exe. Nothing is resolved here;
// [KeepRules.ResolveExe] adds the path with its symlinks resolved, so that
// a rule naming a symlink also matches the program /proc/PID/exe shows,
// and the file as the kernel knows it, so that the kernel spares a member
// at its very exec of it. Members that never exec'd, or exec'd a relative
// path, match an exe rule only through /proc/PID/exe. Errors wrap
// [lineage.ErrInvalid].
func KeepExe(exe string) (Keep, error) {
	switch {
	case exe == "":
		return Keep{}, fmt.Errorf("%w keep rule: empty executable path", lineage.ErrInvalid)
	case !path.IsAbs(exe):
		return Keep{}, fmt.Errorf("%w keep rule: executable path %q is not absolute", lineage.ErrInvalid, exe)
	case path.Clean(exe) != exe:
		return Keep{}, fmt.Errorf("%w keep rule: executable path %q is not clean (want %q)", lineage.ErrInvalid, exe, path.Clean(exe))
	}
	return Keep{by: keepExe, exe: exe}, nil
}

// ParseKeep reads a keep rule in the text form described at [Keep]. Errors
// wrap [lineage.ErrInvalid] (and [lineage.ErrInvalid] for a bad identity).
func ParseKeep(s string) (Keep, error) {
	switch {
	case strings.HasPrefix(s, "exe:"):
		k, err := KeepExe(strings.TrimPrefix(s, "exe:"))
		if err != nil {
			return Keep{}, fmt.Errorf("parse %q: %w", s, err)
		}
		return k, nil
	case strings.HasPrefix(s, "root:"):
		id, err := lineage.ParseIdentity(strings.TrimPrefix(s, "root:"))
		if err != nil {
			return Keep{}, fmt.Errorf("parse %q: keep rule: %w", s, err)
		}
		return KeepRoot(id)
	case strings.Contains(s, "@"):
		id, err := lineage.ParseIdentity(s)
		if err != nil {
			return Keep{}, fmt.Errorf("parse %q: keep rule: %w", s, err)
		}
		return KeepIdentity(id)
	}
	return Keep{}, fmt.Errorf("parse %q: %w keep rule: want PID@START, root:PID@START or exe:PATH", s, lineage.ErrInvalid)
}

// String returns the text form [ParseKeep] reads; "" for the zero Keep.
func (k Keep) String() string {
	switch k.by {
	case keepIdentity:
		return k.id.String()
	case keepRoot:
		return "root:" + k.id.String()
	case keepExe:
		return "exe:" + k.exe
	}
	return ""
}

// MarshalText writes the text form, so a Keep travels in JSON as a string.
func (k Keep) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads the text form as [ParseKeep] does.
func (k *Keep) UnmarshalText(b []byte) error {
	parsed, err := ParseKeep(string(b))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// Spares reports whether k spares m. It looks only at what the backend
// recorded of m (identity, root, exec filename); it reads nothing.
func (k Keep) Spares(m lineage.Member) bool {
	switch k.by {
	case keepIdentity:
		return m.Identity == k.id
	case keepRoot:
		return m.Identity == k.id || m.Root == k.id
	case keepExe:
		return k.matchesExe(m.Filename)
	}
	return false
}

// deletedSuffix is what /proc/PID/exe appends once the file was replaced
// or removed (a program upgraded while it runs).
const deletedSuffix = " (deleted)"

// matchesExe reports whether the executable path name is k's program: the
// path as the rule gives it, or that path resolved. A " (deleted)" suffix
// is ignored.
func (k Keep) matchesExe(name string) bool {
	name = strings.TrimSuffix(name, deletedSuffix)
	if !path.IsAbs(name) {
		return false
	}
	name = path.Clean(name)
	return name == k.exe || (k.resolved != "" && name == k.resolved)
}

// SparesExe reports whether k is an exe rule for any of names: paths of
// one member's program, such as the filename its exec named and what
// /proc/PID/exe shows.
func (k Keep) SparesExe(names ...string) bool {
	if k.by != keepExe {
		return false
	}
	for _, n := range names {
		if k.matchesExe(n) {
			return true
		}
	}
	return false
}

// Exe returns the path an exe rule names, as it was given; ok is false for
// the other rules.
func (k Keep) Exe() (exe string, ok bool) { return k.exe, k.by == keepExe }

// File returns the program an exe rule keeps as the kernel knows it, when
// [KeepRules.ResolveExe] resolved it; ok is false otherwise.
func (k Keep) File() (lineage.FileID, bool) { return k.file, k.by == keepExe && !k.file.IsZero() }

// Process returns the one process a rule by identity (PID@START) keeps;
// ok is false for the other rules.
func (k Keep) Process() (id lineage.Identity, ok bool) { return k.id, k.by == keepIdentity }

// KeepRules is a set of keep rules; a member is spared when any rule spares
// it. A nil KeepRules spares nothing.
type KeepRules []Keep

// ExeResolver resolves the path an exe rule names to the program it
// keeps: the path with its symlinks followed, and that file as the kernel
// knows it. It fails for a path that names no executable file.
// proc.FS.ExeFile is the one lineage uses.
type ExeResolver func(path string) (resolved string, file lineage.FileID, err error)

// ResolveExe returns the rules with each exe rule's program resolved, once,
// when the rules are made: the path with its symlinks followed, so that a
// rule naming a symlink (/usr/bin/python3) matches the program the kernel
// shows (/usr/bin/python3.11), and the file as the kernel knows it, so that
// the kernel spares a member at its exec. A rule whose path resolve refuses
// (no such file, not an executable) stays matched by its name alone, and
// the error says so, rule by rule: a caller making new rules refuses them
// (the error wraps [lineage.ErrInvalid]); one restoring old rules, whose
// program may be gone for now, keeps them.
func (r KeepRules) ResolveExe(resolve ExeResolver) (KeepRules, error) {
	out := slices.Clone(r)
	var errs []error
	for i, k := range out {
		if k.by != keepExe {
			continue
		}
		p, file, err := resolve(k.exe)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w keep rule %s: %w", lineage.ErrInvalid, k, err))
			continue
		}
		out[i].file = file
		if path.IsAbs(p) && path.Clean(p) != k.exe {
			out[i].resolved = path.Clean(p)
		}
	}
	return out, errors.Join(errs...)
}

// ParseKeeps reads each value as [ParseKeep] does (as from repeated --keep
// flags) and fails on the first bad one.
func ParseKeeps(values []string) (KeepRules, error) {
	rules := make(KeepRules, 0, len(values))
	for _, v := range values {
		k, err := ParseKeep(v)
		if err != nil {
			return nil, err
		}
		rules = append(rules, k)
	}
	return rules, nil
}

// Spares returns the first rule that spares m, if any.
func (r KeepRules) Spares(m lineage.Member) (Keep, bool) {
	for _, k := range r {
		if k.Spares(m) {
			return k, true
		}
	}
	return Keep{}, false
}

// KeepsRoot reports whether a root rule keeps root's whole lineage: the
// Kept of [Input]. A rule for root's identity alone spares the root process
// but not its lineage.
func (r KeepRules) KeepsRoot(root lineage.Identity) bool {
	for _, k := range r {
		if k.by == keepRoot && k.id == root {
			return true
		}
	}
	return false
}
