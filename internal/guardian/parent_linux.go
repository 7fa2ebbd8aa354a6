package guardian

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// Config is what [Start] needs.
type Config struct {
	// Path and Args start the guardian: an executable that runs [Serve],
	// such as lineage's hidden `lineage guardian` command. Args follow the
	// program name.
	Path string
	Args []string
	// Stderr receives what the guardian says when it acts or refuses to;
	// nil means /dev/null. Pass a file, never a buffer: the guardian must
	// not depend on lineage to copy its output.
	Stderr *os.File

	// Caller is lineage's protected set (see policy.Caller); Keep and
	// Reaping are the job's keep rules and kill switch; Grace is the time
	// between SIGTERM and SIGKILL.
	Caller  policy.Caller
	Keep    policy.KeepRules
	Reaping policy.Reaping
	Grace   time.Duration

	// Handoff, for the bpf backend, are the loader's handoff files
	// ((*bpf.Tracker).HandoffFiles); Start passes them on and closes them.
	// Nil means the proc backend: members come through [Guardian.Member].
	Handoff []*os.File
	// Containment is the loader's (*bpf.Tracker).Containment (bpf only).
	Containment lineage.Containment
}

// Guardian is lineage's end of a running guardian. Its methods are safe for
// concurrent use by multiple goroutines; none of them blocks on the
// guardian for long.
type Guardian struct {
	pid  int
	w    *os.File
	proc bool // members are streamed

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []message
	done    bool
	written chan struct{} // closed once the writer has finished
}

// Start starts the guardian and tells it what it needs; [Guardian.Root]
// then names the job. Start returns once the guardian runs; from the Root
// call on, if lineage dies without calling Done, the guardian reaps the
// lineage. Start closes cfg.Handoff whatever happens.
//
// With the proc backend, start the guardian before the job, and let the
// backend see it (a scan) before the job starts: the proc backend takes a
// child lineage starts after a job for an orphan of that job.
func Start(cfg Config) (*Guardian, error) {
	defer closeAll(cfg.Handoff)
	h := hello{
		Version: version, Caller: cfg.Caller, Keep: cfg.Keep,
		Reaping: cfg.Reaping, Grace: cfg.Grace, Backend: backendProc,
	}
	if cfg.Handoff != nil {
		h.Backend, h.Files, h.Containment = backendBPF, len(cfg.Handoff), cfg.Containment
	}
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("start guardian: %w", err)
	}
	// os.Pipe makes both ends close-on-exec: only the guardian gets the
	// read end (as fd 3), and nothing but lineage ever holds the write end.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start guardian: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	if cfg.Stderr != nil {
		cmd.Stderr = cfg.Stderr
	}
	cmd.ExtraFiles = append([]*os.File{r}, cfg.Handoff...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	line := encode(message{Hello: &h})
	if len(line) > MaxLine {
		w.Close()
		return nil, fmt.Errorf("start guardian: %w hello: %d bytes, more than %d", lineage.ErrInvalid, len(line), MaxLine)
	}
	// The hello goes first when a pipe surely holds it (a pipe holds at
	// least a page), so that a lineage killed right after Start still
	// leaves the guardian all it needs.
	early := len(line) <= os.Getpagesize()
	if early {
		if _, err := w.Write(line); err != nil {
			w.Close()
			return nil, fmt.Errorf("start guardian: %w", err)
		}
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start guardian: %w", err)
	}
	if !early {
		if _, err := w.Write(line); err != nil {
			w.Close()
			return nil, fmt.Errorf("start guardian: %w", err)
		}
	}
	g := &Guardian{pid: cmd.Process.Pid, w: w, proc: cfg.Handoff == nil, written: make(chan struct{})}
	// Whoever reaps lineage's children (a subreaper's loop) reaps it too.
	_ = cmd.Process.Release()
	g.wake = sync.NewCond(&g.mu)
	go g.write()
	return g, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// PID is the guardian's process id.
func (g *Guardian) PID() int { return g.pid }

// Root names the job whose lineage the guardian guards; call it once, as
// soon as the job runs. It never blocks.
func (g *Guardian) Root(id lineage.Identity) { g.send(message{Root: &id}) }

// Member tells the guardian of a member of the job's lineage (proc backend;
// with the bpf backend the guardian reads the kernel's map and Member does
// nothing). It never blocks: members queue up for a writer goroutine.
// Telling the same member twice is harmless.
func (g *Guardian) Member(id lineage.Identity) {
	if g.proc {
		g.send(message{Member: &id})
	}
}

func (g *Guardian) send(m message) {
	g.mu.Lock()
	if !g.done {
		g.queue = append(g.queue, m)
		g.wake.Signal()
	}
	g.mu.Unlock()
}

// Done tells the guardian that lineage has finished with the job: it exits
// without touching anything. Call it once lineage's own reap (or report) is
// over. Done waits up to a second for the message to be written; later
// calls do nothing.
func (g *Guardian) Done() error {
	g.mu.Lock()
	g.done = true
	g.wake.Signal()
	g.mu.Unlock()
	select {
	case <-g.written:
	case <-time.After(time.Second):
		// A guardian that reads nothing (stopped, say): closing the pipe
		// unblocks the writer.
		_ = g.w.Close()
		<-g.written
		return errors.New("guardian: done: the guardian reads nothing")
	}
	return nil
}

// write sends queued messages, then done, then closes the pipe. A write
// error (the guardian is gone) ends it.
func (g *Guardian) write() {
	defer close(g.written)
	defer g.w.Close()
	var buf []byte
	for {
		g.mu.Lock()
		for len(g.queue) == 0 && !g.done {
			g.wake.Wait()
		}
		batch, done := g.queue, g.done
		g.queue = nil
		g.mu.Unlock()
		if done {
			_, _ = g.w.Write(encode(message{Done: true}))
			return
		}
		buf = buf[:0]
		for _, m := range batch {
			buf = append(buf, encode(m)...)
		}
		if _, err := g.w.Write(buf); err != nil {
			g.mu.Lock()
			g.done = true
			g.mu.Unlock()
			return
		}
	}
}
