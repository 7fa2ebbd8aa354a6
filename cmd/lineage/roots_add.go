package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

func newCmdRootsAdd(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	var req api.AddRoot
	cmd := &cobra.Command{
		Use:   "add PID --session S [--start TICKS]",
		Short: "Register a running process as a root and adopt its descendants",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("roots add: %w pid %q: want a number", lineage.ErrInvalid, args[0])
			}
			if pid <= 1 {
				return fmt.Errorf("roots add: %w pid %d: pid 0 and 1 are never tracked", lineage.ErrInvalid, pid)
			}
			if err := api.CheckSessionID(req.Session); err != nil {
				return err
			}
			req.PID = pid
			return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) (api.Root, error) {
				return c.AddRoot(ctx, req)
			}, func(w io.Writer, out api.Root) { linef(w, "%s\t%s", out.Root, out.Session) })
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&req.Session, "session", "", "the session to join (required)")
	cmd.Flags().Uint64Var(&req.Start, "start", 0, "the process's start time in clock ticks (field 22 of /proc/PID/stat); default: read now")
	cmd.Flags().StringVar(&req.Kind, "kind", "", "the session's runtime if it is opened now")
	cmd.Flags().StringVar(&req.Label, "label", "", "a label for the root")
	cmd.Flags().BoolVar(&req.Join, "join", false, "root only: join the session though another uid opened it (it must exist)")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}
