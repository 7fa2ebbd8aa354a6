package proc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BoottimeOffset reads the calling process's time namespace's boottime
// offset from root/self/timens_offsets. A non-zero offset shifts every
// start time /proc shows this process, so they no longer match the
// kernel's. A kernel without time namespaces has no offset.
func BoottimeOffset(root string) (time.Duration, error) {
	f, err := os.Open(filepath.Join(root, "self/timens_offsets"))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read time namespace offsets: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[0] != "boottime" {
			continue
		}
		sec, err1 := strconv.ParseInt(fields[1], 10, 64)
		nsec, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("read time namespace offsets: bad line %q", sc.Text())
		}
		return time.Duration(sec)*time.Second + time.Duration(nsec), nil
	}
	return 0, sc.Err()
}
