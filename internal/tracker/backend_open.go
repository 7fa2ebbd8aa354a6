package tracker

import (
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/loader/poll"
)

// backendOptions configure the backends [openBackend] may choose; nil
// fields give the defaults.
type backendOptions struct {
	BPF  *bpf.Options
	Proc *poll.Options
}

// openBackend opens the backend choice names, as [loader.Open] decides.
func openBackend(choice string, opts backendOptions) (loader.Backend, loader.Choice, error) {
	return loader.Open(choice, loader.Openers{
		BPF:       func() (loader.Backend, error) { return bpf.Open(opts.BPF) },
		Proc:      func() (loader.Backend, error) { return poll.Open(opts.Proc) },
		CheckBPF:  opts.BPF.Validate,
		CheckProc: opts.Proc.Validate,
	})
}
