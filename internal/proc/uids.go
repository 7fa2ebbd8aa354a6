package proc

// UIDs are a process's real, effective and saved user ids.
type UIDs struct {
	Real, Effective, Saved uint32
}

// UIDs reads pid's user ids from /proc/PID/status.
func (p FS) UIDs(pid int) (UIDs, error) {
	st, err := p.Status(pid)
	if err != nil {
		return UIDs{}, err
	}
	return st.UIDs, nil
}
