package main

import (
	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/guardian"
)

func newCmdGuardian(s cli.Streams) *cobra.Command {
	return &cobra.Command{
		Use:    cli.GuardianCommand,
		Short:  cli.GuardianShort,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := guardian.Main(s.Err); code != 0 {
				return cli.ExitError{Code: code}
			}
			return nil
		},
	}
}
