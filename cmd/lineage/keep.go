package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

func newCmdKeep(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	var req api.AddKeep
	var rm bool
	cmd := &cobra.Command{
		Use:   "keep PID@START [--root] [--ttl D] | keep --rm PID@START [--root] | keep --rm exe:PATH",
		Short: "Spare a process (or, with --root, a root's whole lineage) from its session's reaps; --rm ends the keep (exe:PATH too)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rm {
				if req.TTL != "" {
					return fmt.Errorf("%w: --ttl with --rm: a removed keep has no lifetime", lineage.ErrInvalid)
				}
				rule := args[0]
				if req.Root && strings.HasPrefix(rule, "exe:") {
					return fmt.Errorf("%w: --root with an exe: rule: it names no root", lineage.ErrInvalid)
				}
				if req.Root && !strings.HasPrefix(rule, "root:") {
					rule = "root:" + rule
				}
				if _, err := policy.ParseKeep(rule); err != nil {
					return fmt.Errorf("keep --rm: %w", err)
				}
				return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) (api.Keep, error) {
					return c.RemoveKeep(ctx, rule)
				}, func(w io.Writer, out api.Keep) { linef(w, "unkept %s", out.Rule) })
			}
			if _, err := lineage.ParseIdentity(args[0]); err != nil {
				return fmt.Errorf("keep: %w", err)
			}
			req.Process = args[0]
			return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) (api.Keep, error) {
				return c.AddKeep(ctx, req)
			}, func(w io.Writer, out api.Keep) { linef(w, "kept %s", out.Rule) })
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&req.Root, "root", false, "keep the whole lineage of the root PID@START")
	cmd.Flags().StringVar(&req.TTL, "ttl", "", "how long the keep lasts (default: until the session closes)")
	cmd.Flags().BoolVar(&rm, "rm", false, "end the keep on PID@START (with --root: on the root's lineage), or the session's exe:PATH rule; nothing is signalled")
	return cmd
}
