package job

import (
	"encoding/json"

	"github.com/lineage-dev/lineage/internal/userfile"
)

// ReportFile is where the JSON report goes, pinned before the job starts
// (see userfile.Pinned): nothing the job plants meanwhile can redirect it.
// Writing replaces the file atomically and gives it to the invoking user
// with mode 0644.
type ReportFile struct{ *userfile.Pinned }

// OpenReportFile pins path for the invoking user (SUDO_UID and SUDO_GID
// from getenv when lineage runs as root, else lineage's own ids). A path
// that names no file, or something other than a regular file now (a
// symlink such as /dev/stdout, a device), wraps lineage.ErrInvalid.
func OpenReportFile(path string, getenv func(string) string) (*ReportFile, error) {
	owner, err := userfile.Invoker(getenv)
	if err != nil {
		return nil, err
	}
	p, err := userfile.Pin(path, owner)
	if err != nil {
		return nil, err
	}
	return &ReportFile{p}, nil
}

// Write writes r as indented JSON, replacing the file atomically.
func (f *ReportFile) Write(r *Report) error {
	r.Version = ReportVersion
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return f.Replace(append(data, '\n'), 0o644)
}
