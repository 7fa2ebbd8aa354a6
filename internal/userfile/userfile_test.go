package userfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestInvoker(t *testing.T) {
	o, err := Invoker(env(nil))
	if err != nil || o.UID != os.Getuid() || o.GID != os.Getgid() {
		t.Errorf("no sudo: %+v %v", o, err)
	}
	sudo := env(map[string]string{"SUDO_UID": "65534", "SUDO_GID": "65533"})
	o, err = invoker(sudo, true)
	if err != nil || o.UID != 65534 || o.GID != 65533 {
		t.Errorf("sudo: %+v %v", o, err)
	}
	if o, err = invoker(sudo, false); err != nil || o.UID != os.Getuid() {
		t.Errorf("SUDO_UID without root: %+v %v, want lineage's own uid", o, err)
	}
	for _, bad := range []map[string]string{{"SUDO_UID": "x"}, {"SUDO_UID": "1", "SUDO_GID": "-1"}} {
		if _, err := invoker(env(bad), true); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec")
	if err := os.WriteFile(path, []byte("old secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	owner := Owner{UID: os.Getuid(), GID: os.Getgid()}
	if os.Getuid() == 0 {
		owner = Owner{UID: 65534, GID: 65534}
	}
	f, err := Create(path, owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o600 || int(st.Uid) != owner.UID || int(st.Gid) != owner.GID || fi.Size() != 3 {
		t.Errorf("mode %v uid %d gid %d size %d, want 0600 %+v 3", fi.Mode(), st.Uid, st.Gid, fi.Size(), owner)
	}
}

func TestCreateRefuses(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(target, hard); err != nil {
		t.Fatal(err)
	}
	me := Owner{UID: os.Getuid(), GID: os.Getgid()}
	for _, p := range []string{link, fifo, dir, hard, filepath.Join(dir, "nodir", "x"), dir + "/"} {
		if f, err := Create(p, me); err == nil {
			f.Close()
			t.Errorf("%s: created", p)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("target through the link: %q", b)
	}
}

func TestCreateRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file another user's")
	}
	path := filepath.Join(t.TempDir(), "theirs")
	if err := os.WriteFile(path, []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if f, err := Create(path, Owner{UID: 65534, GID: 65534}); err == nil {
		f.Close()
		t.Fatal("took over another user's file")
	}
	if b, _ := os.ReadFile(path); string(b) != "theirs" {
		t.Errorf("file now %q", b)
	}
}
