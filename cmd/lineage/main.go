// Command lineage tracks every process a command starts, however it tries to
// leave, and ends them when the command's time is up.
package main

import "os"

func main() {
	stop := startProfiles()
	code := execute(os.Args[1:])
	stop()
	os.Exit(code)
}
