//go:build !lean

package main

import (
	"fmt"
	"os"
	"regexp"

	"github.com/spf13/pflag"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/userfile"
)

// recordFlags are `lineage run`'s forensic record flags.
type recordFlags struct {
	File   string
	Redact string

	redact *regexp.Regexp // parsed by parse
}

func (r *recordFlags) add(f *pflag.FlagSet) {
	f.StringVar(&r.File, "record", "", "write a forensic record of the job (JSON Lines, see docs/record.md; render it with 'lineage report') to `FILE`, mode 0600")
	f.StringVar(&r.Redact, "redact", "", "with --record: mask every match of `REGEX` in argv words with *** before it is written")
}

// parse checks the flags before anything is started.
func (r *recordFlags) parse() error {
	if r.Redact == "" {
		return nil
	}
	if r.File == "" {
		return fmt.Errorf("%w flag: --redact needs --record", lineage.ErrInvalid)
	}
	re, err := regexp.Compile(r.Redact)
	if err != nil {
		return fmt.Errorf("%w flag: --redact %q: %v", lineage.ErrInvalid, r.Redact, err)
	}
	r.redact = re
	return nil
}

// open creates the record file for the invoking user before the job
// starts; the job closes it. No --record: the zero spec.
func (r *recordFlags) open() (job.RecordSpec, error) {
	if r.File == "" {
		return job.RecordSpec{}, nil
	}
	owner, err := userfile.Invoker(os.Getenv)
	if err != nil {
		return job.RecordSpec{}, fmt.Errorf("--record: %w", err)
	}
	f, err := userfile.Create(r.File, owner)
	if err != nil {
		return job.RecordSpec{}, fmt.Errorf("--record: %w", err)
	}
	return job.RecordSpec{File: f, Redact: r.redact}, nil
}
