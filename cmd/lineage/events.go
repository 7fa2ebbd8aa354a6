package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
)

func newCmdEvents(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	var session string
	cmd := &cobra.Command{
		Use:   "events [--session S]",
		Short: "Stream lineage events as NDJSON, in the record schema (docs/record.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSessionIDs(session); err != nil {
				return err
			}
			c := client.New(client.Socket(o.Socket))
			defer c.Close()
			body, err := c.Events(cmd.Context(), session)
			if err != nil {
				return err
			}
			defer body.Close()
			_, err = io.Copy(s.Out, body)
			return err
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&session, "session", "", "only this session's events")
	return cmd
}
