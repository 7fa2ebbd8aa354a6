package proc

import "fmt"

// UIDs are a process's real, effective and saved user ids.
type UIDs struct {
	Real, Effective, Saved uint32
}

// UIDs reads pid's user ids from /proc/PID/status.
func (p FS) UIDs(pid int) (UIDs, error) {
	proc, err := p.fs.Proc(pid)
	if err != nil {
		return UIDs{}, procErr(pid, err)
	}
	st, err := proc.NewStatus()
	if err != nil {
		return UIDs{}, procErr(pid, err)
	}
	if st.PID != pid {
		return UIDs{}, fmt.Errorf("pid %d: status is for pid %d", pid, st.PID)
	}
	return UIDs{Real: uint32(st.UIDs[0]), Effective: uint32(st.UIDs[1]), Saved: uint32(st.UIDs[2])}, nil
}
