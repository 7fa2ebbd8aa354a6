//go:build !linux

package proc

import (
	"errors"

	"github.com/lineage-dev/lineage/lineage"
)

// ExeFile resolves path as an exe keep rule names a program; only Linux
// knows files as its kernel does.
func (p FS) ExeFile(path string) (string, lineage.FileID, error) {
	return "", lineage.FileID{}, errors.New("exe keep rules need Linux")
}
