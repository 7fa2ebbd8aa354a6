package lineage

import "testing"

func TestKernelDevIsTheKernelsEncoding(t *testing.T) {
	for _, c := range []struct {
		major, minor uint32
		want         uint32
	}{
		{0, 0, 0},
		{8, 1, 0x00800001},     // sda1
		{0, 42, 42},            // an anonymous device: tmpfs, overlayfs, btrfs
		{259, 300, 0x1030012c}, // nvme, a minor past the 8 bits stat's encoding keeps low
		{4095, 1<<20 - 1, 0xffffffff},
	} {
		if got := KernelDev(c.major, c.minor); got != c.want {
			t.Errorf("KernelDev(%d, %d) = %#x, want %#x", c.major, c.minor, got, c.want)
		}
	}
}

func TestFileIDString(t *testing.T) {
	f := FileID{Dev: KernelDev(259, 300), Ino: 1234}
	if got := f.String(); got != "259:300:1234" {
		t.Errorf("String() = %q", got)
	}
	if f.IsZero() || !(FileID{}).IsZero() {
		t.Error("IsZero")
	}
}
