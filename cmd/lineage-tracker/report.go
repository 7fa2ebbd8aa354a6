package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/report"
	"github.com/lineage-dev/lineage/internal/userfile"
	"github.com/lineage-dev/lineage/lineage"
)

// reportFormats are the values of `lineage report --format`.
var reportFormats = []string{"tree", "json", "html", "chrome-trace"}

// reportOptions are the dependencies and flag values of `lineage report`.
type reportOptions struct {
	out, err io.Writer
	// color reports whether w is a terminal that takes colour.
	color func(w io.Writer) bool

	File   string
	Format string
	Output string
	// LeaksOnly and Depth shape the tree: only the paths to leaks; no
	// deeper than Depth (-1: every level).
	LeaksOnly bool
	Depth     int
}

func newCmdReport(s cli.Streams, runF func(*reportOptions) error) *cobra.Command {
	opts := &reportOptions{color: wantsColor}
	cmd := &cobra.Command{
		Use:   "report FILE",
		Short: cli.ReportShort,
		Long: `report reads a record written by lineage (JSON Lines, see docs/record.md) and
renders it:

  tree          a summary (leaks, kept, reaped, the longest-lived, those that
                outlived their root, the top spawners, the losses), then a tree
                by lineage parent with each process's argv, lifetime and end;
                leaks marked LEAK, events lost in a gap marked "fork not
                recorded" and the like (the default)
  json          the summary and the reconstructed tree, for tools
  html          one self-contained page: the summary, then the tree with a
                timeline bar per process, coloured by outcome; subtrees closed
                but the paths to the leaks; filters by argv and by outcome
  chrome-trace  Trace Event Format, for ui.perfetto.dev or chrome://tracing

--leaks-only draws only the paths to the leaks, and --depth N no deeper than
depth N (the tops are depth 0), each subtree cut off summarised in one line
("… 37 more processes"); both are for the tree.

A damaged record (a line cut short, a corrupt line, a newer schema) is rendered
as far as it can be, and the report says which lines were bad and what it could
not know. tree, json and chrome-trace read records of any size in memory that
grows with the number of processes, not the record; html refuses records over
256 MiB or 50,000 processes.

The report goes to stdout, or to the file named by --output, created for the
invoking user (SUDO_UID/SUDO_GID when set) with mode 0600 once the record is
read, as 'lineage run --record' creates its record: a symbolic link, anything
but a regular file, a file with other hard links or another user's, and the
record itself are refused, and nothing is written. Colour is used when stdout
is a terminal and NO_COLOR is unset.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.out, opts.err, opts.File = cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0]
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return reportRun(opts)
		},
	}
	if s.Out != nil {
		cmd.SetOut(s.Out)
	}
	if s.Err != nil {
		cmd.SetErr(s.Err)
	}
	cmd.Flags().StringVarP(&opts.Format, "format", "f", "tree", "output format: "+strings.Join(reportFormats, ", "))
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "write the report to this file rather than stdout")
	cmd.Flags().BoolVar(&opts.LeaksOnly, "leaks-only", false, "tree: draw only the paths to the leaks")
	cmd.Flags().IntVar(&opts.Depth, "depth", -1, "tree: draw no deeper than depth N (the tops are 0), summarising what is cut off; -1 draws every level")
	return cmd
}

func (o *reportOptions) validate() error {
	if !slices.Contains(reportFormats, o.Format) {
		return fmt.Errorf("%w --format %q: want one of %s", lineage.ErrInvalid, o.Format, strings.Join(reportFormats, ", "))
	}
	if o.Depth < -1 {
		return fmt.Errorf("%w --depth %d: want a depth of 0 or more, or -1 for every level", lineage.ErrInvalid, o.Depth)
	}
	if o.Format != "tree" && (o.LeaksOnly || o.Depth >= 0) {
		return fmt.Errorf("%w option: --leaks-only and --depth apply to --format tree only, not to --format %s", lineage.ErrInvalid, o.Format)
	}
	if o.Output != "" && userfile.Same(o.File, o.Output) {
		return fmt.Errorf("%w --output %s: the same file as the record %s: the report would overwrite it", lineage.ErrInvalid, o.Output, o.File)
	}
	return nil
}

// reportRun reads the record and writes the report.
func reportRun(opts *reportOptions) error {
	f, err := os.Open(opts.File)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	if opts.Format == "html" {
		if st, err := f.Stat(); err == nil && st.Size() > report.MaxHTMLRecord {
			return fmt.Errorf("report: %s is %d MiB: %w (at most %d MiB): use --format chrome-trace and open it in Perfetto (ui.perfetto.dev), or --format tree",
				opts.File, st.Size()>>20, report.ErrTooLarge, report.MaxHTMLRecord>>20)
		}
	}
	r, err := record.NewReader(f)
	if err != nil {
		return fmt.Errorf("report %s: %w", opts.File, err)
	}
	rep, err := report.Build(r)
	if err != nil {
		return fmt.Errorf("report %s: %w", opts.File, err)
	}
	if err := writeReport(opts, rep); err != nil {
		return err
	}
	if n := len(rep.Problems) + rep.Dropped; n > 0 && opts.Format != "tree" {
		fmt.Fprintf(opts.err, "lineage: %s: %d %s, the first: %s (the report lists %s)\n", opts.File, n, lineage.Plural(n, "problem", "problems"), lineage.Printable(rep.Problems[0].String()), lineage.Plural(n, "it", "them"))
	}
	return nil
}

// writeReport writes rep in the chosen format to stdout or opts.Output.
func writeReport(opts *reportOptions, rep *report.Report) (err error) {
	w := opts.out
	if opts.Output != "" {
		f, err := createOutput(opts.Output)
		if err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("report: %w", cerr)
			}
		}()
		w = f
	}
	switch opts.Format {
	case "json":
		return rep.WriteJSON(w)
	case "html":
		return rep.WriteHTML(w)
	case "chrome-trace":
		return rep.WriteChromeTrace(w)
	}
	return rep.WriteText(w, report.TextOptions{Color: opts.Output == "" && opts.color(w), LeaksOnly: opts.LeaksOnly, Levels: opts.Depth + 1})
}

// createOutput creates or truncates the report's file for the invoking
// user, mode 0600, as `lineage run --record` creates its record: a
// symbolic link, anything but a regular file, and a file with other hard
// links or another user's are refused, and nothing is written.
func createOutput(path string) (*os.File, error) {
	owner, err := userfile.Invoker(os.Getenv)
	if err != nil {
		return nil, err
	}
	return userfile.Create(path, owner)
}

// wantsColor reports whether w is a terminal and NO_COLOR is unset
// (no-color.org: any non-empty value turns colour off).
func wantsColor(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
