package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/doctor"
)

// exitNoBPF is doctor's exit status when the bpf backend can't be used here.
const exitNoBPF = 1

// doctorOptions are the dependencies and flag values of `lineage doctor`.
type doctorOptions struct {
	out io.Writer
	// system is the machine examined; tests swap in fakes.
	system doctor.System

	JSON bool
}

func newCmdDoctor(s cli.Streams, runF func(*doctorOptions) error) *cobra.Command {
	opts := &doctorOptions{system: doctor.Host()}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: cli.DoctorShort,
		Long: `doctor checks what this machine allows lineage to do and says, in plain words,
what will work, what won't and why. It reads the bpf backend's own pre-checks
and probes (the BPF ring buffer and tracepoints, BTF, privileges and
capabilities, kernel lockdown, whether /proc shows the kernel's global pids),
looks at BPF-LSM, bpffs and tracefs, pidfd, child subreaper and cgroup v2,
then loads the BPF tracker for real (attached for a moment and closed again)
and says, feature by feature, what this kernel gives: which program variant
loads (exact tracking), how a reap is contained, whether a lineage dies with
a SIGKILLed lineage (hard cancel), and how exec argv is recorded.

It prints a table (check, status, detail) and a verdict line: "backend: bpf
available", or "backend: proc fallback, because ...". With --json it prints
the same as one JSON document.

Exit status:
  0    the bpf backend is available
  1    it is not: lineage falls back to polling /proc (the verdict says why)
  125  doctor itself failed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.out = cmd.OutOrStdout()
			if runF != nil {
				return runF(opts)
			}
			return doctorRun(opts)
		},
	}
	if s.Out != nil {
		cmd.SetOut(s.Out)
	}
	if s.Err != nil {
		cmd.SetErr(s.Err)
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as a JSON document")
	return cmd
}

// doctorRun examines opts.system and prints the report. It returns an
// cli.ExitError with exitNoBPF when the bpf backend is not available.
func doctorRun(opts *doctorOptions) error {
	rep := doctor.Run(opts.system)
	write := rep.WriteTable
	if opts.JSON {
		write = rep.WriteJSON
	}
	if err := write(opts.out); err != nil {
		return err
	}
	if !rep.BPFAvailable {
		return cli.ExitError{Code: exitNoBPF}
	}
	return nil
}
