//go:build !lean

package main

import (
	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/guardian"
)

func newCmdGuardian(s streams) *cobra.Command {
	return &cobra.Command{
		Use:    guardianCommand,
		Short:  guardianShort,
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
