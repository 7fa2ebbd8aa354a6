package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lineage-dev/lineage/lineage"
)

// AddSocket adds --socket to f, bound to path: the daemon's Unix socket.
// An empty value is refused as it is set: given on purpose it names no
// socket, and taking it for "unset" (the default socket) would reach a
// daemon the caller did not name.
func AddSocket(f *pflag.FlagSet, path *string, usage string) {
	f.Var((*socketPath)(path), "socket", usage)
}

// socketPath is the pflag.Value behind --socket.
type socketPath string

// Set implements pflag.Value.
func (p *socketPath) Set(s string) error {
	if s == "" {
		return fmt.Errorf("%w option: an empty path names no socket (leave the flag out for the default one)", lineage.ErrInvalid)
	}
	*p = socketPath(s)
	return nil
}

// String implements pflag.Value.
func (p *socketPath) String() string { return string(*p) }

// Type implements pflag.Value.
func (p *socketPath) Type() string { return "PATH" }
