package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/server"
)

// Runner is one `lineage run` job's hold on the daemon: a session of its
// own, autonomous, with the job's keep rules, owned by the calling process
// (when asked), so that the daemon reaps the job if the caller dies. It
// is the [job.Remote] that [job.RunRemote] uses. Close it when the job is
// done.
type Runner struct {
	c       *Client
	session string
	status  server.Status
}

// RunnerOptions say how a Runner's session is opened.
type RunnerOptions struct {
	// Owner, if set, is the process whose death makes the daemon close
	// the session, reaping the job: the caller itself.
	Owner *lineage.Identity
	Keep  policy.KeepRules
	// Backend is what the caller asked for ("auto", "bpf"): a daemon with
	// another backend is refused.
	Backend string
}

// OpenRunner asks the daemon at socket, as c was made for, whether it
// answers and tracks with the backend asked for, then opens the job's
// session. On error nothing is left open.
func OpenRunner(ctx context.Context, c *Client, opts RunnerOptions) (*Runner, error) {
	r := &Runner{c: c}
	if err := c.Do(ctx, http.MethodGet, "/v1/status", nil, &r.status); err != nil {
		return nil, err
	}
	if opts.Backend != loader.BackendAuto && opts.Backend != r.status.Backend {
		return nil, fmt.Errorf("the daemon's backend is %q, not %q", r.status.Backend, opts.Backend)
	}
	var se server.Session
	req := server.OpenSession{Kind: policy.Autonomous.String(), Label: "lineage run", Owner: opts.Owner, Keep: opts.Keep}
	if err := c.Do(ctx, http.MethodPost, "/v1/sessions", req, &se); err != nil {
		return nil, fmt.Errorf("open a session: %w", err)
	}
	r.session = se.ID
	return r, nil
}

// Session is the job's session id.
func (r *Runner) Session() string { return r.session }

// Backend is the daemon's backend.
func (r *Runner) Backend() string { return r.status.Backend }

// Register is [job.Remote.Register].
func (r *Runner) Register(ctx context.Context, root lineage.Identity, command []string) error {
	req := server.AddRoot{PID: int64(root.PID), Start: root.StartTicks, Session: r.session, Command: command}
	return r.c.Do(ctx, http.MethodPost, "/v1/roots", req, nil)
}

// End is [job.Remote.End].
func (r *Runner) End(ctx context.Context, end job.RemoteEnd) (*job.Report, error) {
	req := server.EndRoot{
		Event:      end.Event.String(),
		ReapingOff: end.Reaping.Off, ReapingBy: end.Reaping.By,
		Linger: end.Reap.Linger, Grace: end.Reap.Grace, Timeout: end.Reap.Timeout,
	}
	var rep job.Report
	if err := r.c.Do(ctx, http.MethodPost, "/v1/roots/"+end.Root.String()+"/end", req, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Close closes the job's session (the job's root is forgotten by then:
// nothing is left to reap) and the client's connections.
func (r *Runner) Close(ctx context.Context) error {
	defer r.c.Close()
	return r.c.Do(ctx, http.MethodPost, "/v1/sessions/"+r.session+"/close", nil, nil)
}
