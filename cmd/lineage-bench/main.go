// Command lineage-bench measures what lineage costs, side by side in one
// run, and prints the tables docs/benchmarks.md shows:
//
//   - the fork+exit+wait and fork+exec+wait rates of a spawner with no
//     tracker, with the BPF tracker loaded but not tracking it, and with the
//     tracker tracking it, interleaved round by round;
//   - the wall time of `lineage run -- true` against plain `true`;
//   - with -only daemon, that wall time through a daemon, and an unrelated
//     spawner's fork rate beside 0, 1, 4 and 16 idle runs through a daemon
//     and standalone, each against no lineage at all measured just before
//     (daemonforks_linux.go);
//   - with -record, only the spawner's rates under `lineage run` with and
//     without --record, and the events a second the record sustains
//     before its first loss, by ring size (sustain_linux.go);
//   - the reap at every width (10 to 5,000 leftovers): cgroup.kill, a
//     minimal pidfd killer, `lineage run` standalone and through the
//     daemon, and a session close, job exit → reaper exit;
//   - the sidecar's: `lineage exec -- true` over `true`, registering a
//     process with 1,000 descendants, closing a session of 100 roots with
//     10 leftovers each beside the pidfd floor for 1,000, and the daemon's
//     RSS idle and with 10,000 members;
//   - with -only clients, the Python client's Client.run(["true"]) over
//     subprocess.run(["true"]), and the pytest plugin's cost per test on
//     1,000 trivial tests (clients_linux.go).
//   - with -only shared, a daemon many users share: registration and turn
//     end with 1 to 10,000 sessions open, root's status while another uid
//     holds its maximum of streams (serve_shared_linux.go).
//
// It needs root (the BPF tracker) and gcc (the spawner is a small C program,
// so that the Go runtime's own fork cost doesn't blur the figures).
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed csrc/spawner.c
var spawnerSource []byte

func main() {
	rounds := flag.Int("rounds", 15, "interleaved rounds per figure (the median is reported)")
	forks := flag.Int("forks", 2000, "forks per fork+exit+wait measurement")
	execs := flag.Int("execs", 800, "forks per fork+exec+wait measurement")
	runs := flag.Int("runs", 30, "runs per `lineage run -- true` measurement")
	lineageBin := flag.String("lineage", "bin/lineage", "the lineage binary to time")
	variantList := flag.String("variants", "full,compat", "the BPF program variants to measure side by side (auto: the one this kernel gets); one this kernel refuses is left out")
	guardRuns := flag.Int("guardian-forks", 2000, "forks per `lineage run` spawner measurement, guardian on and off (0: skip)")
	recordOnly := flag.Bool("record", false, "measure only what `lineage run --record` costs the spawner")
	reapRounds := flag.Int("reap-rounds", 3, "interleaved rounds per reap figure")
	reapSizes := flag.String("reap-sizes", "10,100,300,1000,5000", "the numbers of leftovers the reap is measured at")
	only := flag.String("only", "", `"reap": measure the reap latency alone; "rates": the spawner's rates untracked and tracked, by variant, alone; "daemon": lineage run through a daemon against standalone; "serve": the sidecar's figures alone; "clients": the Python client's and the pytest plugin's; "shared": a daemon many users share (sessions open, streams held)`)
	cf := clientFlags()
	sh := sharedFlags()
	sb := serveFlags()
	fr := forkFlags()
	sf := sustainFlagSet()
	flag.Parse()
	if sh.holdSock != "" {
		holdStreams(sh.holdSock, sh.holdSession)
		return
	}
	sizes := mustSizes(*reapSizes)
	alone := map[string]func(){
		"serve":   func() { benchServe(*lineageBin, *sb) },
		"clients": func() { benchClients(*lineageBin, *cf) },
		"daemon":  func() { benchDaemon(*lineageBin, *runs, *fr) },
		"reap":    func() { benchReap(*lineageBin, sizes, *reapRounds) },
		"rates":   func() { benchRates(*variantList, *rounds, *forks, *execs) },
		"shared":  func() { benchShared(*lineageBin, sb.rounds, sh.runs, sh.samples) },
	}
	if bench, ok := alone[*only]; ok {
		fmt.Printf("## lineage benchmarks\n\n%s\n\n%s\n\n", machine(), binaries(*lineageBin))
		bench()
		return
	}

	dir, err := tempDir("", "lineage-bench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	spawner, err := buildSpawner(dir)
	if err != nil {
		fail(err)
	}

	fmt.Printf("## lineage benchmarks\n\n%s\n\n%s\n\n", machine(), binaries(*lineageBin))
	if *recordOnly {
		benchRecord(*lineageBin, spawner, *rounds, *forks, *execs, sf)
		return
	}
	variants, err := usableVariants(*variantList)
	if err != nil {
		fail(err)
	}
	rates, err := measureRates(spawner, variants, *rounds, *forks, *execs)
	if err != nil {
		fail(err)
	}
	printRates(rates, variants)

	if *guardRuns > 0 {
		guard, err := measureGuardian(*lineageBin, spawner, *rounds, *guardRuns)
		if err != nil {
			fail(err)
		}
		printGuardian(guard)
	}

	walls, err := measureRunWall(*lineageBin, *rounds, *runs)
	if err != nil {
		fail(err)
	}
	printWalls(walls)
	benchReap(*lineageBin, sizes, *reapRounds)
	benchServe(*lineageBin, *sb)
}

// benchRecord measures and prints what `lineage run --record` costs the
// spawner, and the events a second the record sustains by ring size.
func benchRecord(lineageBin, spawner string, rounds, forks, execs int, sf *sustainFlags) {
	rates, err := measureRecordRates(lineageBin, spawner, rounds, forks, execs)
	if err != nil {
		fail(err)
	}
	printRecordRates(rates)
	if *sf.rounds > 0 {
		load := loadAverage()
		res, rings, err := measureSustained(lineageBin, spawner, sf)
		if err != nil {
			fail(err)
		}
		printSustained(res, rings, sf, load)
	}
}

// benchRates measures and prints the spawner's rates alone: no tracker,
// and each variant loaded and tracking.
func benchRates(variantList string, rounds, forks, execs int) {
	dir, err := tempDir("", "lineage-bench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	spawner, err := buildSpawner(dir)
	if err != nil {
		fail(err)
	}
	variants, err := usableVariants(variantList)
	if err != nil {
		fail(err)
	}
	rates, err := measureRates(spawner, variants, rounds, forks, execs)
	if err != nil {
		fail(err)
	}
	printRates(rates, variants)
}

// mustSizes reads -reap-sizes, or fails.
func mustSizes(list string) []int {
	sizes, err := parseSizes(list)
	if err != nil {
		fail(err)
	}
	return sizes
}

// parseSizes reads -reap-sizes.
func parseSizes(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-reap-sizes: %q is not a number of leftovers", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func benchReap(lineageBin string, sizes []int, rounds int) {
	load := loadAverage()
	res, cols, err := measureReap(lineageBin, sizes, rounds)
	if err != nil {
		fail(err)
	}
	printReap(res, sizes, cols, rounds, load)
}

// temps are the temporary directories the benchmark made and has not
// removed yet. Not safe for concurrent use: the benchmark makes them from
// its main goroutine.
var temps []string

// tempDir makes a temporary directory under parent ("": $TMPDIR) that
// fail removes if the benchmark fails before its own deferred removal.
func tempDir(parent, prefix string) (string, error) {
	dir, err := os.MkdirTemp(parent, prefix)
	if err == nil {
		temps = append(temps, dir)
	}
	return dir, err
}

// fail reports err and exits with status 1, after removing the temporary
// directories: os.Exit runs no deferred calls.
func fail(err error) {
	fmt.Fprintf(os.Stderr, "lineage-bench: %v\n", err)
	for _, dir := range temps {
		os.RemoveAll(dir)
	}
	os.Exit(1)
}

func buildSpawner(dir string) (string, error) {
	src := filepath.Join(dir, "spawner.c")
	bin := filepath.Join(dir, "spawner")
	if err := os.WriteFile(src, spawnerSource, 0o644); err != nil {
		return "", err
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	out, err := exec.Command(cc, "-O2", "-o", bin, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the spawner with %s: %v: %s", cc, err, out)
	}
	return bin, nil
}

// binaries says what -lineage is: the front with lineage-tracker beside
// it (make build: the front hands serve and a standalone run to the
// tracker, and times exec and run through the daemon itself).
func binaries(lineageBin string) string {
	tracker := filepath.Join(filepath.Dir(lineageBin), "lineage-tracker")
	if _, err := os.Stat(tracker); err == nil {
		return fmt.Sprintf("Binaries: %s, the front, with %s beside it.", lineageBin, tracker)
	}
	return fmt.Sprintf("Binaries: %s, with no lineage-tracker beside it: serve and a standalone run will fail.", lineageBin)
}

// machine describes where the figures were measured.
func machine() string {
	var uname []byte
	if out, err := exec.Command("uname", "-srm").Output(); err == nil {
		uname = out
	}
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "model name") {
				if _, v, ok := strings.Cut(line, ":"); ok {
					model = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	return fmt.Sprintf("Machine: %s, %d CPUs (%s), %s, %s.", strings.TrimSpace(string(uname)), machineCPUs(), model, runtime.Version(), time.Now().UTC().Format("2006-01-02"))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
