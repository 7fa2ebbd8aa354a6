package proc

// Exe returns the path of the executable pid runs, as the kernel resolved it
// (/proc/PID/exe). It is empty for kernel threads and zombies.
func (p FS) Exe(pid int) (string, error) {
	proc, err := p.fs.Proc(pid)
	if err != nil {
		return "", procErr(pid, err)
	}
	exe, err := proc.Executable()
	if err != nil {
		return "", procErr(pid, err)
	}
	return exe, nil
}
