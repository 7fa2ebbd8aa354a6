package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
)

func newCmdRootsRm(s cli.Streams) *cobra.Command {
	return newCmdOnRoot(s, "rm PID@START", "Stop tracking a root's lineage; nothing is signalled", (*client.Client).RemoveRoot,
		func(w io.Writer, out api.Root) { linef(w, "untracked %s", out.Root) })
}
