package userfile

import (
	"os"
	"path/filepath"
)

// Same reports whether paths a and b name one file, so that writing one
// would overwrite the other: the same path once made absolute and cleaned;
// the same existing file, however it is reached (symbolic links, hard
// links: [os.SameFile]); or, for a file not there yet, the same name in the
// same directory, however the directory is reached. A path it can't stat
// is compared by name alone.
func Same(a, b string) bool {
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	if errA == nil && errB == nil && absA == absB {
		return true
	}
	if sameFile(a, b) {
		return true
	}
	return filepath.Base(a) == filepath.Base(b) && sameFile(filepath.Dir(a), filepath.Dir(b))
}

// sameFile reports whether a and b both exist and are one file, following
// symbolic links.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
