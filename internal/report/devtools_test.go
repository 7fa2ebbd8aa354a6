package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// devtools is a headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: requests on its fd 3, answers and events
// on its fd 4, each message one JSON object ended by a NUL byte), so that a
// test can load a page, click and type in it, and read its DOM and timings.
type devtools struct {
	tb      testing.TB
	cmd     *exec.Cmd
	in      *os.File
	stderr  bytes.Buffer
	next    int
	target  string
	session string

	mu      sync.Mutex
	waiting map[int]chan cdpMessage
	console []string // console calls and uncaught exceptions, in words
	closed  chan struct{}
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// cdpTimeout bounds each call to the browser (scaled by testutil.WaitScale).
const cdpTimeout = 120 * time.Second

// startDevtools starts a headless Chromium with a window of width×height
// CSS pixels; it is closed when tb ends, and a process of it left behind
// fails tb.
func startDevtools(tb testing.TB, width, height int) *devtools {
	tb.Helper()
	browser := chromium(tb)
	mark := testutil.Marker(tb)
	testutil.CheckNoLeaks(tb, mark)
	toR, toW, err := os.Pipe()
	must(tb, err)
	fromR, fromW, err := os.Pipe()
	must(tb, err)
	d := &devtools{tb: tb, in: toW, waiting: map[int]chan cdpMessage{}, closed: make(chan struct{})}
	d.cmd = exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
		fmt.Sprintf("--window-size=%d,%d", width, height), "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(tb.TempDir(), "profile-"+mark), "about:blank")
	d.cmd.ExtraFiles = []*os.File{toR, fromW}
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	toR.Close()
	fromW.Close()
	go d.read(bufio.NewReader(fromR))
	tb.Cleanup(d.close)
	return d
}

// read delivers answers to their callers and keeps console messages, until
// the browser closes its end.
func (d *devtools) read(r *bufio.Reader) {
	defer close(d.closed)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		d.mu.Lock()
		switch {
		case m.ID != 0:
			if ch, ok := d.waiting[m.ID]; ok {
				ch <- m
				delete(d.waiting, m.ID)
			}
		case m.Method == "Runtime.consoleAPICalled" || m.Method == "Runtime.exceptionThrown":
			d.console = append(d.console, m.Method+": "+string(m.Params))
		}
		d.mu.Unlock()
	}
}

// call sends one request (to the page, once one is open) and decodes its
// result into out (if not nil).
func (d *devtools) call(method string, params, out any) {
	d.tb.Helper()
	d.next++
	msg := map[string]any{"id": d.next, "method": method, "params": params}
	if d.session != "" && !strings.HasPrefix(method, "Target.") && !strings.HasPrefix(method, "Browser.") {
		msg["sessionId"] = d.session
	}
	raw, err := json.Marshal(msg)
	must(d.tb, err)
	ch := make(chan cdpMessage, 1)
	d.mu.Lock()
	d.waiting[d.next] = ch
	d.mu.Unlock()
	if _, err := d.in.Write(append(raw, 0)); err != nil {
		d.tb.Fatalf("devtools %s: %v\n%s", method, err, d.stderr.String())
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			d.tb.Fatalf("devtools %s: %s", method, m.Error.Message)
		}
		if out != nil {
			must(d.tb, json.Unmarshal(m.Result, out))
		}
	case <-d.closed:
		d.tb.Fatalf("devtools %s: the browser closed the pipe\n%s", method, d.stderr.String())
	case <-time.After(cdpTimeout * testutil.WaitScale()):
		d.tb.Fatalf("devtools %s: no answer in %v", method, cdpTimeout*testutil.WaitScale())
	}
}

// open loads the page at path in a new tab, waits until its script has
// rendered it (body's data-rendered), and makes it the target of calls.
func (d *devtools) open(path string) {
	d.tb.Helper()
	if d.target != "" {
		d.call("Target.closeTarget", map[string]any{"targetId": d.target}, nil)
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	d.call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	d.call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	d.target, d.session = target.TargetID, attached.SessionID
	d.call("Runtime.enable", map[string]any{}, nil)
	d.call("Page.enable", map[string]any{}, nil)
	d.call("Page.navigate", map[string]any{"url": "file://" + path}, nil)
	d.await(`document.body && document.body.dataset.rendered === "yes"`)
}

// awaitTimeout bounds a wait inside the page (scaled by testutil.WaitScale).
const awaitTimeout = 30 * time.Second

// await waits, inside the page, until cond (a JavaScript expression) holds,
// and fails the test if it does not within awaitTimeout.
func (d *devtools) await(cond string) {
	d.tb.Helper()
	limit := awaitTimeout * testutil.WaitScale()
	var held bool
	d.eval(fmt.Sprintf(`new Promise(function (done) {
		var until = performance.now() + %d;
		(function poll() {
			if (%s) done(true);
			else if (performance.now() > until) done(false);
			else setTimeout(poll, 10);
		})();
	})`, limit.Milliseconds(), cond), &held)
	if !held {
		d.tb.Fatalf("waited %v in the page for %s: it never held", limit, cond)
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out (if not nil).
func (d *devtools) eval(expr string, out any) {
	d.tb.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	d.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if res.Exception != nil {
		d.tb.Fatalf("evaluate %q: %s %s", expr, res.Exception.Text, res.Exception.Exception.Description)
	}
	if out != nil {
		must(d.tb, json.Unmarshal(res.Result.Value, out))
	}
}

// click clicks, with the mouse, the middle of the first element that
// matches selector, as a user would.
func (d *devtools) click(selector string) {
	d.tb.Helper()
	x, y := d.middle(selector)
	for _, kind := range []string{"mousePressed", "mouseReleased"} {
		d.call("Input.dispatchMouseEvent", map[string]any{"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}, nil)
	}
}

// middle scrolls the first element that matches selector into view and
// returns its middle, in the window's coordinates.
func (d *devtools) middle(selector string) (x, y float64) {
	d.tb.Helper()
	var at struct{ X, Y float64 }
	d.eval(fmt.Sprintf(`(function () {
		var e = document.querySelector(%q);
		if (!e) throw new Error("no element matches " + %q);
		e.scrollIntoView({block: "nearest"});
		var r = e.getBoundingClientRect();
		return {X: r.left + r.width / 2, Y: r.top + r.height / 2};
	})()`, selector, selector), &at)
	return at.X, at.Y
}

// hover moves the mouse over the middle of the first element that matches
// selector.
func (d *devtools) hover(selector string) {
	d.tb.Helper()
	x, y := d.middle(selector)
	d.call("Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": x, "y": y}, nil)
}

// typeInto focuses the element that matches selector and types text.
func (d *devtools) typeInto(selector, text string) {
	d.tb.Helper()
	d.click(selector)
	d.call("Input.insertText", map[string]any{"text": text}, nil)
}

// consoleMessages returns what the page logged and threw so far.
func (d *devtools) consoleMessages() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.console...)
}

// close asks the browser to close, and kills it (by the process this test
// started) if it does not.
func (d *devtools) close() {
	d.next++
	raw, _ := json.Marshal(map[string]any{"id": d.next, "method": "Browser.close", "params": map[string]any{}})
	_, _ = d.in.Write(append(raw, 0))
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second * testutil.WaitScale()):
		_ = d.cmd.Process.Kill()
		<-done
	}
	d.in.Close()
}
