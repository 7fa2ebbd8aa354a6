package main

import (
	"io"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
)

func newCmdTurn(s streams) *cobra.Command {
	cmd := &cobra.Command{Use: "turn", Short: "End an agent's turn"}
	cmd.AddCommand(newCmdTurnEnd(s))
	return cmd
}

func newCmdTurnEnd(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "end S",
		Short: "End a turn: an autonomous session's processes are reaped, an interactive one's reported",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out api.Ended
			return o.call(cmd.Context(), "POST", "/v1/sessions/"+url.PathEscape(args[0])+"/turn-end", nil, &out, func(w io.Writer) { printEnded(w, out) })
		},
	}
	o.flags(cmd)
	return cmd
}
