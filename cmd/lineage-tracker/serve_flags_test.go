package main

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/server"
	"github.com/lineage-dev/lineage/lineage"
)

// Bad record flags, a grace that isn't positive and a negative linger
// are refused before anything starts.
func TestServeRecordFlags(t *testing.T) {
	base := serveOptions{Backend: "auto", SocketMode: "0660", RecordKeep: server.DefaultRecordKeep, RecordMax: "1GiB", MaxMembers: loader.DefaultMaxMembers, PinDir: pinNone, Grace: reap.DefaultGrace}
	for name, tc := range map[string]struct {
		change func(*serveOptions)
		ok     bool
	}{
		"no record":         {func(*serveOptions) {}, true},
		"record dir":        {func(o *serveOptions) { o.RecordDir = "/tmp/r" }, true},
		"keep 1":            {func(o *serveOptions) { o.RecordDir, o.RecordKeep = "/tmp/r", 1 }, true},
		"keep 0":            {func(o *serveOptions) { o.RecordDir, o.RecordKeep = "/tmp/r", 0 }, false},
		"keep -5":           {func(o *serveOptions) { o.RecordDir, o.RecordKeep = "/tmp/r", -5 }, false},
		"redact, no dir":    {func(o *serveOptions) { o.Redact = "x" }, false},
		"redact, bad regex": {func(o *serveOptions) { o.RecordDir, o.Redact = "/tmp/r", "(" }, false},
		"redact":            {func(o *serveOptions) { o.RecordDir, o.Redact = "/tmp/r", `token=\S+` }, true},
		"max bytes 4K":      {func(o *serveOptions) { o.RecordDir, o.RecordMax = "/tmp/r", "4K" }, true},
		"max bytes 0":       {func(o *serveOptions) { o.RecordDir, o.RecordMax = "/tmp/r", "0" }, false},
		"max bytes -1":      {func(o *serveOptions) { o.RecordDir, o.RecordMax = "/tmp/r", "-1" }, false},
		"max bytes 1T":      {func(o *serveOptions) { o.RecordDir, o.RecordMax = "/tmp/r", "1T" }, false},
		"grace 0":           {func(o *serveOptions) { o.Grace = 0 }, false},
		"grace -1s":         {func(o *serveOptions) { o.Grace = -time.Second }, false},
		"linger -1s":        {func(o *serveOptions) { o.Linger = -time.Second }, false},
		"linger 2s":         {func(o *serveOptions) { o.Linger = 2 * time.Second }, true},
	} {
		o := base
		tc.change(&o)
		opts, _, err := o.options()
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", name, err)
		case !tc.ok && !errors.Is(err, lineage.ErrInvalid):
			t.Errorf("%s: %v, want an invalid-option error", name, err)
		case tc.ok && opts.Record.Dir != o.RecordDir:
			t.Errorf("%s: record dir %q, want %q", name, opts.Record.Dir, o.RecordDir)
		case tc.ok && o.RecordMax == "4K" && opts.Record.MaxBytes != 4096:
			t.Errorf("%s: record max bytes %d, want 4096", name, opts.Record.MaxBytes)
		}
	}
}

// --socket-mode and --socket-group reach the listener; bad modes are
// refused as invalid before anything starts.
func TestServeSocketFlags(t *testing.T) {
	o := serveOptions{Backend: "auto", SocketMode: "0640", SocketGroup: "lineage", RecordKeep: server.DefaultRecordKeep, RecordMax: "1GiB", MaxMembers: loader.DefaultMaxMembers, PinDir: pinNone, Grace: reap.DefaultGrace}
	if _, ln, err := o.options(); err != nil || ln.Mode != 0o640 || ln.Group != "lineage" {
		t.Errorf("listen options %+v, %v; want 0640 and group lineage", ln, err)
	}
	for _, mode := range []string{"", "abc", "0778", "1777", "-1", "0x1ff"} {
		o.SocketMode = mode
		if _, _, err := o.options(); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("--socket-mode %q: %v, want an invalid-option error", mode, err)
		}
	}
}

func TestServeMetricsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--metrics-listen", "nowhere:-1"}, {"--max-members", "1"}, {"--ring-bytes", "3M"}, {"--ring-bytes", "1k"}, {"--ring-bytes", "lots"}} {
		var out strings.Builder
		root := newRootCmd(cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		sock := t.TempDir() + "/s.sock"
		root.SetArgs(append([]string{"serve", "--socket", sock, "--state-dir", t.TempDir(), "--pin-dir", "none"}, args...))
		if err := root.Execute(); err == nil {
			t.Errorf("serve %v: no error", args)
		}
		if _, err := net.Dial("unix", sock); err == nil {
			t.Errorf("serve %v: listens on the socket after failing", args)
		}
	}
}

// --ring-bytes: a daemon that writes records gets the record's size
// unless told; a size given wins.
func TestServeRingBytes(t *testing.T) {
	base := serveOptions{Backend: "auto", SocketMode: "0660", RecordKeep: server.DefaultRecordKeep, RecordMax: "1GiB", MaxMembers: loader.DefaultMaxMembers, PinDir: pinNone, Grace: reap.DefaultGrace}
	given := base
	if err := given.RingBytes.Set("64K"); err != nil {
		t.Fatal(err)
	}
	withDir := given
	withDir.RecordDir = "/tmp/r"
	records := base
	records.RecordDir = "/tmp/r"
	for name, c := range map[string]struct {
		o    serveOptions
		want uint32
	}{
		"no records": {base, loader.DefaultRingBytes},
		"records":    {records, loader.RecordRingBytes},
		"given":      {given, 64 << 10},
		"given, dir": {withDir, 64 << 10},
	} {
		opts, _, err := c.o.options()
		if err != nil || opts.Tracker.RingBytes != c.want {
			t.Errorf("%s: ring %d, %v; want %d", name, opts.Tracker.RingBytes, err, c.want)
		}
	}
}

// --uninstall of a --pin-dir that holds no tracker (a typo, or a directory
// off bpffs where the daemon pinned nothing) says so, succeeds, and leaves
// the directory.
func TestServeUninstallOfNothingPinned(t *testing.T) {
	made := t.TempDir()
	for _, dir := range []string{made, made + "/no-such-dir"} {
		var out strings.Builder
		root := newRootCmd(cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		root.SetArgs([]string{"serve", "--uninstall", "--pin-dir", dir})
		if err := root.Execute(); err != nil || !strings.Contains(out.String(), "no tracker is pinned under "+dir) {
			t.Errorf("--uninstall --pin-dir %s: %v, %q; want it to say nothing was pinned", dir, err, out.String())
		}
	}
	if _, err := os.Stat(made); err != nil {
		t.Errorf("the pin dir after --uninstall: %v, want it left", err)
	}
}

// An empty --socket is refused as the flags are read, not taken for the
// default socket: the daemon starts nowhere.
func TestServeRefusesAnEmptySocket(t *testing.T) {
	var out strings.Builder
	root := newRootCmd(cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
	root.SetArgs([]string{"serve", "--socket=", "--state-dir", t.TempDir(), "--pin-dir", "none"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "empty path names no socket") {
		t.Errorf("serve --socket='': %v, want the empty path refused", err)
	}
}

// A --pin-dir off bpffs is refused before anything starts, whether
// --backend is bpf or auto (which must not fall back to proc for it):
// neither it nor the state dir is made.
func TestServeRefusesAPinDirOffBPFFS(t *testing.T) {
	for _, backend := range []string{"auto", "bpf"} {
		pins, state := t.TempDir()+"/pins", t.TempDir()+"/state"
		var out strings.Builder
		root := newRootCmd(cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		sock := t.TempDir() + "/s.sock"
		root.SetArgs([]string{"serve", "--backend", backend, "--socket", sock, "--state-dir", state, "--pin-dir", pins})
		done := make(chan error, 1)
		go func() { done <- root.Execute() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			// The daemon serves on, on the proc backend: the process's
			// exit at the tests' end stops it.
			t.Fatalf("--backend %s --pin-dir %s: still serving after 30s: %q", backend, pins, out.String())
		}
		if !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "pin dir "+pins+": not on a BPF filesystem") {
			t.Errorf("--backend %s --pin-dir %s: %v (%q), want it refused as off bpffs", backend, pins, err, out.String())
		}
		if _, err := net.Dial("unix", sock); err == nil {
			t.Errorf("--backend %s: listens on the socket after failing", backend)
		}
		for _, dir := range []string{pins, state} {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--backend %s: %s was made (%v)", backend, dir, err)
			}
		}
	}
}
