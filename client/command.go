package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// DefaultHoldDelay is how long [Command.Wait] waits, once the command has
// exited, for its output pipes to reach end of file before it stops
// reading them and names who still holds them.
const DefaultHoldDelay = 100 * time.Millisecond

// EnvLineage names the lineage binary a [Command] starts its command
// through, when its Lineage field doesn't.
const EnvLineage = "LINEAGE_BIN"

// Command is a command run as a root of a session, in os/exec.Cmd's
// image. It starts through `lineage exec`, which registers its own
// process with the daemon and then execve's the command: same pid, same
// start time, so the command is a root of the session from its first
// instruction, and whatever it forks, however it detaches, is its lineage.
//
// Unlike os/exec.Cmd, its Wait never waits on leftovers: once the command
// itself has exited, Wait waits at most HoldDelay for its output pipes to
// close, keeps every byte written to them until then, and names in
// Holders the members of its lineage that still hold them (a `cmd &` that
// inherited stdout). The leftovers run on: the session's policy decides
// their fate at its turn end or close. A context that ends before the
// command does ends the command's whole lineage through the daemon (its
// root's end, as a deadline), and nothing else of the session.
//
// A Command can't be reused after Start, Run, Output or CombinedOutput.
type Command struct {
	// Path is the command to run; Args its argv, Args[0] included. The
	// command runs with Path as its argv[0] (lineage exec passes its
	// command's name on), whatever Args[0] says.
	Path string
	Args []string
	// Env is the environment of the command (and of the lineage exec
	// before it); nil means this process's. Dir is its working directory;
	// "" means this process's.
	Env []string
	Dir string
	// Stdin, Stdout and Stderr are as in os/exec.Cmd: nil is the null
	// device, an *os.File is given to the command as it is (and never
	// waited on), anything else is fed or filled through a pipe. When
	// Stdout and Stderr are the same writer they share one pipe.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	// Session is the session the command joins, by its id, which must be
	// given (opened with Kind if it doesn't exist); Label the root's
	// label.
	Session string
	Kind    string
	Label   string
	// HoldDelay is how long Wait waits for the output pipes after the
	// command exits; zero means DefaultHoldDelay.
	HoldDelay time.Duration
	// Lineage is the lineage binary; "" means $LINEAGE_BIN, else lineage
	// on $PATH.
	Lineage string

	// Process is the started process, ProcessState its state once Wait
	// returned, Root its identity, the root the daemon tracks.
	Process      *os.Process
	ProcessState *os.ProcessState
	Root         lineage.Identity
	// Holders, once Wait returned, are the members of the lineage that
	// held an output pipe when the hold delay ran out.
	Holders []Holder
	// Err is an error in making the command (its name not found).
	Err error

	client *Client
	ctx    context.Context
	cmd    *exec.Cmd
	pipes  []*outPipe
	stdin  *inPipe
	// exited is closed once the command has been waited for; ended is the
	// outcome of the lineage's end, closed once it is known, when the
	// context ended it.
	exited   chan struct{}
	endDone  chan struct{}
	endErr   error
	ended    bool
	finished bool
}

// Holder is a member of a command's lineage that held one of its output
// pipes after the command exited.
type Holder struct {
	Process lineage.Identity
	Parent  lineage.Identity
	Comm    string
	Argv    []string
	Age     time.Duration
	// Streams are the command's streams it held: "stdout", "stderr".
	Streams []string
}

// Command returns a Command that runs name with args as a root of
// session, in the manner of os/exec.Command.
func (c *Client) Command(session, name string, args ...string) *Command {
	return c.CommandContext(context.Background(), session, name, args...)
}

// CommandContext is [Client.Command] with a context: when ctx ends before
// the command exits, the command's lineage is ended through the daemon
// (terminated, then killed after the daemon's grace), and Wait returns an
// error that wraps ctx's.
func (c *Client) CommandContext(ctx context.Context, session, name string, args ...string) *Command {
	if ctx == nil {
		panic("client: nil Context")
	}
	cmd := &Command{Path: name, Args: append([]string{name}, args...), Session: session, client: c, ctx: ctx}
	if filepath.Base(name) == name {
		if lp, err := exec.LookPath(name); err != nil {
			cmd.Err = err
		} else {
			cmd.Path = lp
		}
	}
	return cmd
}

// String is the command line, for people.
func (c *Command) String() string { return strings.Join(append([]string{c.Path}, c.Args[1:]...), " ") }

// Run starts the command and waits for it (see [Command.Wait]).
func (c *Command) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output. A failure's
// *exec.ExitError holds the start of its standard error when Stderr was
// nil.
func (c *Command) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("client: Stdout already set")
	}
	var out bytes.Buffer
	c.Stdout = &out
	var errb *prefixBuffer
	if c.Stderr == nil {
		errb = &prefixBuffer{max: 32 << 10}
		c.Stderr = errb
	}
	err := c.Run()
	var ee *exec.ExitError
	if errb != nil && errors.As(err, &ee) {
		ee.Stderr = errb.Bytes()
	}
	return out.Bytes(), err
}

// CombinedOutput runs the command and returns its standard output and
// standard error together.
func (c *Command) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("client: Stdout or Stderr already set")
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.Bytes(), err
}

// Start starts the command through lineage exec and does not wait for it.
// An empty Session is an error, and nothing is sent or run. Before it
// starts anything, Start looks the session up, and opens it (with Kind) if
// it doesn't exist: no daemon (an error wrapping [ErrNoDaemon]) or a
// refusal (an [*APIError]: a bad id, an unknown kind; a session another
// uid opened, a conflict, since its roots would be its opener's) is an
// error from Start, and nothing runs.
//
// The registration itself is lineage exec's, in the process Start
// started, and Start doesn't wait for it. A refusal only the registration
// meets runs nothing either, but comes back from Wait: the process a
// member of a tracked lineage (whose processes the daemon won't register
// in another session); the session closing, or the daemon stopped, since
// Start's look. lineage exec then exits with
// status 125, having written one line to the command's Stderr,
// "lineage: exec: register: " and the daemon's answer (or why it could not
// be reached), and Wait returns that *exec.ExitError. 125 is lineage's own
// failure, as it is env(1)'s and timeout(1)'s; a caller whose command may
// itself exit 125 tells the two apart by that line.
func (c *Command) Start() error {
	if c.Err != nil {
		return c.Err
	}
	if c.cmd != nil {
		return errors.New("client: already started")
	}
	if c.Session == "" {
		// Asked for, the daemon would open a session of its naming.
		return fmt.Errorf("client: Command.Session: %w", errEmptyID)
	}
	if c.client == nil {
		c.client = New(Socket(""))
	}
	if c.ctx == nil {
		c.ctx = context.Background()
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	bin, err := c.lineageBinary()
	if err != nil {
		return err
	}
	if err := c.client.ensureSession(c.ctx, c.Session, c.Kind); err != nil {
		return err
	}
	argv := []string{bin, "exec", "--socket", c.client.socket, "--session", c.Session}
	if c.Kind != "" {
		argv = append(argv, "--kind", c.Kind)
	}
	if c.Label != "" {
		argv = append(argv, "--label", c.Label)
	}
	argv = append(argv, "--", c.Path)
	argv = append(argv, c.Args[1:]...)
	c.cmd = &exec.Cmd{Path: bin, Args: argv, Env: c.Env, Dir: c.Dir}
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	if err := c.setupStdin(&childEnds); err != nil {
		c.closePipes()
		return err
	}
	if err := c.setupOutput(&childEnds); err != nil {
		c.closePipes()
		return err
	}
	if err := c.cmd.Start(); err != nil {
		c.closePipes()
		return err
	}
	c.Process = c.cmd.Process
	// Not waited for yet, so the pid is still the command's: its start
	// time is the root's.
	if start, err := startTicks(c.Process.Pid); err == nil {
		c.Root = lineage.Identity{PID: uint32(c.Process.Pid), StartTicks: start}
	}
	c.exited = make(chan struct{})
	for _, p := range c.pipes {
		go p.copy()
	}
	if c.stdin != nil {
		go c.stdin.copy()
	}
	if c.ctx.Done() != nil {
		c.endDone = make(chan struct{})
		go c.watchContext()
	}
	return nil
}

func (c *Command) lineageBinary() (string, error) {
	bin := c.Lineage
	if bin == "" {
		bin = os.Getenv(EnvLineage)
	}
	if bin == "" {
		bin = "lineage"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("client: the lineage binary (set Lineage or $%s): %w", EnvLineage, err)
	}
	return path, nil
}

// watchContext ends the lineage when the context ends before the command
// has exited.
func (c *Command) watchContext() {
	defer close(c.endDone)
	select {
	case <-c.exited:
		return
	case <-c.ctx.Done():
	}
	c.ended = true
	c.endErr = c.endLineage()
}

// endLineage ends the command's root as a deadline does: the daemon reaps
// its lineage, sparing what the session keeps, and forgets the root. When
// the daemon doesn't know the root yet (lineage exec has not registered
// it), the process is killed, by the pid this Command holds unwaited, and
// the end asked again, for a registration that raced with the kill.
func (c *Command) endLineage() error {
	bg := context.WithoutCancel(c.ctx)
	end := func() error {
		return c.client.EndRoot(bg, c.Root, api.EndRoot{Event: "deadline"}, nil)
	}
	if c.Root.IsZero() {
		return c.Process.Kill()
	}
	err := end()
	if err == nil {
		return nil
	}
	_ = c.Process.Kill()
	<-c.exited
	if again := end(); again != nil && !isNotFound(again) {
		return errors.Join(err, again)
	}
	return nil
}

func isNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Body.Code == api.CodeNotFound
}

// Wait waits for the command to exit, then at most HoldDelay for its
// output pipes, and returns. Output written until then is kept; members
// still holding a pipe then are named in Holders and left running. The
// error is an *exec.ExitError when the command failed (or lineage exec's
// registration, status 125: see [Command.Start]), wraps the
// context's error when the context ended its lineage, and is a copy's
// error (a writer that failed) otherwise; nil when the command exited 0,
// whoever still holds its pipes.
func (c *Command) Wait() error {
	if c.cmd == nil {
		return errors.New("client: not started")
	}
	if c.finished {
		return errors.New("client: Wait was already called")
	}
	c.finished = true
	waitErr := c.cmd.Wait()
	c.ProcessState = c.cmd.ProcessState
	close(c.exited)
	if c.stdin != nil {
		// Whoever holds the command's stdin now, the feed stops.
		c.stdin.w.Close()
	}
	if c.endDone != nil {
		<-c.endDone
	}
	c.awaitPipes()
	var copyErr error
	for _, p := range c.pipes {
		p.r.Close()
		if copyErr == nil {
			copyErr = p.err
		}
	}
	if c.ended {
		err := fmt.Errorf("client: %s: lineage ended: %w", c.Path, context.Cause(c.ctx))
		if c.endErr != nil {
			err = fmt.Errorf("%w (the end: %v)", err, c.endErr)
		}
		return err
	}
	if waitErr != nil {
		return waitErr
	}
	return copyErr
}

// awaitPipes waits up to the hold delay for every output pipe's end of
// file; past it, it names the pipes' holders and stops the copies, each
// with what its pipe held then.
func (c *Command) awaitPipes() {
	if len(c.pipes) == 0 {
		return
	}
	delay := c.HoldDelay
	if delay <= 0 {
		delay = DefaultHoldDelay
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	expired := false
	for _, p := range c.pipes {
		select {
		case <-p.done:
		case <-timer.C:
			expired = true
		}
		if expired {
			break
		}
	}
	var held []*outPipe
	for _, p := range c.pipes {
		select {
		case <-p.done:
		default:
			held = append(held, p)
		}
	}
	if len(held) == 0 {
		return
	}
	if !c.ended && !c.Root.IsZero() {
		c.Holders = c.holders(held)
	}
	for _, p := range held {
		p.stop()
	}
	for _, p := range held {
		<-p.done
	}
}

// holders asks the daemon who holds the pipes.
func (c *Command) holders(held []*outPipe) []Holder {
	streams := map[uint64][]string{}
	inodes := make([]uint64, len(held))
	for i, p := range held {
		inodes[i] = p.ino
		streams[p.ino] = p.streams
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
	defer cancel()
	got, err := c.client.Holders(ctx, c.Root, inodes...)
	if err != nil {
		return nil
	}
	out := make([]Holder, 0, len(got.Holders))
	for _, h := range got.Holders {
		hl := Holder{Process: h.Process, Parent: h.Parent, Comm: h.Comm, Argv: h.Argv, Age: h.Age}
		for _, fd := range h.FDs {
			for _, s := range streams[fd.Pipe] {
				if !containsString(hl.Streams, s) {
					hl.Streams = append(hl.Streams, s)
				}
			}
		}
		out = append(out, hl)
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
