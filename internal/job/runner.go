// Package remote is `lineage run`'s side of a job run through the daemon:
// a [Runner] is the [Remote] that [RunRemote] registers the job's
// root with and has end its lineage.
package job

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// Runner is one `lineage run` job's hold on the daemon: a session of its
// own, autonomous, with the job's keep rules, owned by the calling process
// (when asked), so that the daemon reaps the job if the caller dies. The
// session is opened with the root's registration and closed with its end.
// It is the [Remote] that [RunRemote] uses. Close it when the job
// is done.
type Runner struct {
	c      *client.Client
	opts   RunnerOptions
	status api.Status
	// session is the job's session id, chosen when the Runner opens.
	session string
	// open: the session may be open on the daemon (registered, not ended).
	open bool
}

// RunnerOptions say how a Runner's session is opened.
type RunnerOptions struct {
	// Self is the calling process: it names the session (with a random
	// suffix, so that no one can take the id first).
	Self lineage.Identity
	// Owned makes Self the session's owner: its death makes the daemon
	// close the session, reaping the job.
	Owned bool
	Keep  policy.KeepRules
	// Backend is what the caller asked for ("auto", "bpf"): a daemon with
	// another backend is refused.
	Backend string
}

// OpenRunner asks the daemon c talks to whether it answers, and tracks
// with the backend asked for.
func OpenRunner(ctx context.Context, c *client.Client, opts RunnerOptions) (*Runner, error) {
	r := &Runner{c: c, opts: opts, session: runSessionID(opts.Self)}
	var err error
	if r.status, err = c.Status(ctx); err != nil {
		return nil, err
	}
	if opts.Backend != loader.BackendAuto && opts.Backend != r.status.Backend {
		return nil, fmt.Errorf("the daemon's backend is %q, not %q", r.status.Backend, opts.Backend)
	}
	return r, nil
}

// runSessionID names the session of a run by the calling process self,
// with a random suffix not to be guessed: another uid who opened the id
// first would push the run off the daemon.
func runSessionID(self lineage.Identity) string {
	return fmt.Sprintf("run-%d-%d-%s", self.PID, self.StartTicks, strings.ToLower(rand.Text()[:10]))
}

// Session is the job's session id: run-PID-START- and a random suffix.
func (r *Runner) Session() string { return r.session }

// Backend is the daemon's backend.
func (r *Runner) Backend() string { return r.status.Backend }

// Register is [Remote.Register]: it opens the job's session with root
// in it, this process its orphanage where the daemon takes one
// (RunRemote made it the root's parent and a child subreaper, and it
// starts no other child).
func (r *Runner) Register(ctx context.Context, root lineage.Identity, command []string) error {
	req := api.AddRoot{
		PID: int64(root.PID), Start: root.StartTicks, Command: command,
		Session: r.Session(), Kind: policy.Autonomous.String(), Label: "lineage run", Keep: r.opts.Keep,
		Orphanage: slices.Contains(r.status.Features, api.FeatureOrphanage),
	}
	if r.opts.Owned {
		self := r.opts.Self
		req.Owner = &self
	}
	_, err := r.c.AddRoot(ctx, req)
	// A refusal opened nothing; a lost answer may have.
	var ae *client.APIError
	r.open = err == nil || !errors.As(err, &ae)
	return err
}

// End is [Remote.End]: it closes the job's session too.
func (r *Runner) End(ctx context.Context, end RemoteEnd) (*Report, error) {
	req := api.EndRoot{
		Event:      end.Event.String(),
		ReapingOff: end.Reaping.Off, ReapingBy: end.Reaping.By,
		Linger: end.Reap.Linger, Grace: end.Reap.Grace, Timeout: end.Reap.Timeout,
		Close: true,
	}
	var rep Report
	if err := r.c.EndRoot(ctx, end.Root, req, &rep); err != nil {
		if ctx.Err() != nil {
			// Hung up: the daemon hurries the reap; wait for it to end.
			r.awaitForgotten(end.Root, hurriedReap)
		}
		return nil, err
	}
	r.open = false
	return &rep, nil
}

// hurriedReap bounds the wait for a reap the caller hung up on: the daemon
// kills what is left without waiting.
const hurriedReap = 10 * time.Second

// awaitForgotten waits up to limit for the daemon to forget root, which it
// does once the root's reap is done.
func (r *Runner) awaitForgotten(root lineage.Identity, limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for ctx.Err() == nil {
		_, err := r.c.Root(ctx, root)
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close closes the job's session if End did not, and the client's
// connections.
func (r *Runner) Close(ctx context.Context) error {
	defer r.c.Close()
	if !r.open {
		return nil
	}
	_, err := r.c.CloseSession(ctx, r.Session())
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil // never opened
	}
	return err
}
