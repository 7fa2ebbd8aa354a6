package cli

import (
	"fmt"
	"regexp"

	"github.com/spf13/pflag"

	"github.com/lineage-dev/lineage/lineage"
)

// recordFlags are `lineage run`'s forensic record flags.
type recordFlags struct {
	File   string
	Redact string

	redact *regexp.Regexp // parsed by parse
}

func (r *recordFlags) add(f *pflag.FlagSet) {
	f.StringVar(&r.File, "record", "", "write a forensic record of the job (JSON Lines, see docs/record.md; render it with 'lineage report') to `FILE`, mode 0600")
	f.StringVar(&r.Redact, "redact", "", "mask every match of `REGEX` in argv words with ***: in the --record, the report on stderr and the --report")
}

// parse checks the flags before anything is started.
func (r *recordFlags) parse() error {
	if r.Redact == "" {
		return nil
	}
	re, err := regexp.Compile(r.Redact)
	if err != nil {
		return fmt.Errorf("%w flag: --redact %q: %v", lineage.ErrInvalid, r.Redact, err)
	}
	r.redact = re
	return nil
}
