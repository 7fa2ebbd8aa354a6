package lineage

import "fmt"

// FileID is a file as the kernel knows it when it runs a program: the
// device of its filesystem, in the kernel's own encoding of a superblock's
// s_dev (major << 20 | minor), and its inode number. Exe keep rules name
// their program this way to the kernel, which compares it at every exec.
//
// stat(2) encodes a device differently (st_dev: see [KernelDev]), and some
// filesystems report there another device than their superblock's (btrfs
// subvolumes, overlayfs), so a FileID is best learnt from the mount the
// file is on (package proc does). The zero FileID names no file.
type FileID struct {
	Dev uint32 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// IsZero reports whether f names no file.
func (f FileID) IsZero() bool { return f == FileID{} }

// String formats f as "MAJOR:MINOR:INODE".
func (f FileID) String() string {
	return fmt.Sprintf("%d:%d:%d", f.Dev>>kernelMinorBits, f.Dev&kernelMinorMask, f.Ino)
}

// The kernel's dev_t: 12 bits of major above 20 bits of minor
// (include/linux/kdev_t.h, MINORBITS).
const (
	kernelMinorBits = 20
	kernelMinorMask = 1<<kernelMinorBits - 1
)

// KernelDev encodes the device major:minor as the kernel's dev_t does
// (MKDEV), the value a BPF program reads from a superblock's s_dev. It is
// the one conversion from the numbers user space sees (mountinfo's
// major:minor, or unix.Major and unix.Minor of stat's st_dev, whose own
// encoding splits the minor around the major).
func KernelDev(major, minor uint32) uint32 {
	return major<<kernelMinorBits | minor&kernelMinorMask
}
