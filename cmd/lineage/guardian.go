package main

import (
	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/guardian"
)

// guardianCommand is the hidden subcommand `lineage run` starts as its
// guardian (see internal/guardian).
const guardianCommand = "guardian"

func newCmdGuardian(s streams) *cobra.Command {
	return &cobra.Command{
		Use:    guardianCommand,
		Short:  "Reap a job's lineage if the lineage run that started it dies (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := guardian.Main(s.err); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}
