package tracker

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// exeKeeps is what the kernel knows of a job's exe rules: for each rule's
// path, the files it was told that path names. A rule names its program
// as the file was when the rule was made; a package upgrade may put a new
// file at that path later. When a member execs the path and the kernel
// did not spare it, the path is resolved again, and a new file is told to
// the kernel too (the old one may still run) and reported.
type exeKeeps struct {
	resolve policy.ExeResolver

	mu    sync.Mutex
	known map[string][]lineage.FileID
	notes []string
}

// newExeKeeps is the exe rules of rules as they were resolved.
func newExeKeeps(rules policy.KeepRules, resolve policy.ExeResolver) *exeKeeps {
	e := &exeKeeps{resolve: resolve, known: make(map[string][]lineage.FileID)}
	for _, k := range rules {
		exe, ok := k.Exe()
		if !ok {
			continue
		}
		e.known[exe] = e.known[exe] // a rule that did not resolve knows none
		if f, ok := k.File(); ok && !slices.Contains(e.known[exe], f) {
			e.known[exe] = append(e.known[exe], f)
		}
	}
	return e
}

// files lists every file the rules name, for the kernel.
func (e *exeKeeps) files() []lineage.FileID {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []lineage.FileID
	for _, fs := range e.known {
		for _, f := range fs {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// recheck resolves exe, a rule's path, again after a member exec'd it and
// the kernel did not spare it, and returns the file it names now when the
// rule did not know it: the path was replaced since. Otherwise (the same
// file: a script, whose interpreter is what the kernel runs, or an exec
// the kernel skipped the hook for; or a path that names nothing now) it
// returns false.
func (e *exeKeeps) recheck(exe string) (lineage.FileID, []lineage.FileID, bool) {
	if e == nil {
		return lineage.FileID{}, nil, false
	}
	_, f, err := e.resolve(exe)
	e.mu.Lock()
	defer e.mu.Unlock()
	before, ruled := e.known[exe]
	if err != nil || !ruled || slices.Contains(before, f) {
		return lineage.FileID{}, nil, false
	}
	e.known[exe] = append(slices.Clone(before), f)
	return f, before, true
}

// note keeps a change for the job's report.
func (e *exeKeeps) note(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notes = append(e.notes, s)
}

// changes are the notes on the rules' files that changed.
func (e *exeKeeps) changes() []string {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.notes)
}

// exeChanged handles a member's exec of exe, a rule's path, that the
// kernel did not spare: if the path names another file now, the kernel
// keeps that file too, and the change goes to the log, the report and the
// record.
func (j *Job) exeChanged(rule policy.Keep, exe string, ev lineage.Event) {
	f, before, changed := j.exes.recheck(exe)
	if !changed {
		return
	}
	was := "no file"
	if len(before) > 0 {
		names := make([]string, len(before))
		for i, b := range before {
			names[i] = b.String()
		}
		was = strings.Join(names, " and ")
	}
	msg := fmt.Sprintf("--keep %s: the file at %s changed since the rule was made (it was %s, it is %s now: a package upgrade, say): the new one is kept too",
		rule, exe, was, f)
	if k, ok := j.t.backend.(loader.KernelKeeper); ok {
		if err := k.KeepExe(j.root, f); err != nil {
			msg += fmt.Sprintf(", by user space alone (the kernel: %v)", err)
		}
	}
	j.exes.note(msg)
	j.t.note("lineage: %s\n", msg)
	if r := j.t.recorder.Load(); r != nil {
		r.kept(lineage.Member{Identity: ev.Process, Parent: ev.Parent, Root: ev.Root, Filename: ev.Filename, Comm: ev.Comm}, msg)
	}
}
