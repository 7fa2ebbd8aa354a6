package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/buildinfo"
)

func NewCmdVersion(s Streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print lineage's version, commit, Go release, architecture and BPF objects' digest",
		Long: `version prints what this binary is: its version (git describe at build
time), the commit, the Go release that built it, the architecture it was
built for (amd64, arm64) and a digest of the BPF objects embedded in it (12
hex digits of a SHA-256). Records, reports and
the daemon's lineage_build_info metric carry the same. lineage --version
prints the same line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Get()
			if !asJSON {
				_, err := fmt.Fprintf(s.Out, "lineage %s\n", info)
				return err
			}
			enc := json.NewEncoder(s.Out)
			enc.SetIndent("", "  ")
			return enc.Encode(info)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as a JSON object")
	return cmd
}
