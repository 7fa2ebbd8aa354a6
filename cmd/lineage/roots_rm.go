package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
)

func newCmdRootsRm(s streams) *cobra.Command {
	return newCmdOnRoot(s, "rm PID@START", "Stop tracking a root's lineage; nothing is signalled", "DELETE",
		func(w io.Writer, out api.Root) { linef(w, "untracked %s", out.Root) })
}
