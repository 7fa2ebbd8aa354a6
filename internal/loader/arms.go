package loader

import "errors"

// ErrArmsFull is wrapped when the bpf backend's arms map has no room for
// another process (see the bpf tracker's Arm).
var ErrArmsFull = errors.New("arms map full")
