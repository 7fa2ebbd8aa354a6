package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// RequireChromiumEnv turns the Chromium test's skip into a failure: CI sets
// it where chromium is installed.
const RequireChromiumEnv = "LINEAGE_REQUIRE_CHROMIUM"

// chromium returns the path of a Chromium browser, or skips tb (fails it
// under LINEAGE_REQUIRE_CHROMIUM).
func chromium(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv(RequireChromiumEnv) != "" {
		tb.Fatalf("chromium is required (%s is set) but not installed: apt-get install chromium", RequireChromiumEnv)
	}
	tb.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// renderDOM opens page in headless Chromium and returns the DOM after its
// scripts ran, and the console messages it logged.
func renderDOM(tb testing.TB, page []byte) (dom string, console []string) {
	tb.Helper()
	browser := chromium(tb)
	mark := testutil.Marker(tb)
	testutil.CheckNoLeaks(tb, mark)
	dir := tb.TempDir()
	path := filepath.Join(dir, "report.html")
	must(tb, os.WriteFile(path, page, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+filepath.Join(dir, "profile-"+mark), "--enable-logging=stderr", "--v=0",
		"--dump-dom", "file://"+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return stdout.String(), console
}

var (
	barClass  = regexp.MustCompile(`<div class="bar ([^"]*)"`)
	renderMS  = regexp.MustCompile(`data-render-ms="([0-9.]+)"`)
	injection = regexp.MustCompile(`(?i)<img`)
)

func TestHTMLInChromium(t *testing.T) {
	rep := build(t, fixture(t))
	var page bytes.Buffer
	must(t, rep.WriteHTML(&page))
	dom, console := renderDOM(t, page.Bytes())
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `data-rendered="yes"`) {
		t.Fatalf("the page's script did not finish:\n%s", dom)
	}
	bars := barClass.FindAllStringSubmatch(dom, -1)
	if len(bars) != rep.Summary.Processes {
		t.Errorf("%d bars for %d processes", len(bars), rep.Summary.Processes)
	}
	leaks := 0
	for _, b := range bars {
		if strings.Contains(" "+b[1]+" ", " leak ") {
			leaks++
		}
	}
	if leaks != 2 || strings.Count(dom, `<span class="badge">LEAK</span>`) != 2 {
		t.Errorf("%d leak bars, want 2", leaks)
	}
	if injection.MatchString(dom) {
		t.Error("argv injected an element into the page")
	}
	if !strings.Contains(dom, "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") {
		t.Error("the hostile argv is not shown as text")
	}
}

func TestHTMLInChromiumManyProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts a browser on 3,000 processes")
	}
	var rec bytes.Buffer
	synthetic(t, &rec, DrawLimit+1000, 1)
	rep := build(t, rec.Bytes())
	var page bytes.Buffer
	must(t, rep.WriteHTML(&page))
	dom, console := renderDOM(t, page.Bytes())
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	if n := len(barClass.FindAllString(dom, -1)); n != DrawLimit {
		t.Errorf("%d bars drawn, want the limit %d", n, DrawLimit)
	}
	if !strings.Contains(dom, "1000 more processes not drawn") {
		t.Error("the page does not say what it left out")
	}
}

// BenchmarkHTMLChromium measures the HTML report of 1,000 processes: its
// size, the time its script takes to render in headless Chromium, and the
// browser's wall time from start to the rendered DOM.
func BenchmarkHTMLChromium(b *testing.B) {
	var rec bytes.Buffer
	synthetic(b, &rec, 1000, 1)
	rep := build(b, rec.Bytes())
	var page bytes.Buffer
	must(b, rep.WriteHTML(&page))
	var render float64
	b.ResetTimer()
	for range b.N {
		dom, _ := renderDOM(b, page.Bytes())
		m := renderMS.FindStringSubmatch(dom)
		if m == nil {
			b.Fatal("no render time in the DOM")
		}
		ms, _ := strconv.ParseFloat(m[1], 64)
		render += ms
	}
	b.ReportMetric(render/float64(b.N), "render-ms")
	b.ReportMetric(float64(page.Len())/1024, "KiB")
}
