"""Tests of lineage_client against a real daemon.

They need one: cmd/lineage/python_client_e2e_test.go (run by `make test`)
installs the package into a venv, starts a daemon and runs
`python -m unittest` here with LINEAGE_SOCKET, LINEAGE_BIN and
LINEAGE_TEST_MARK set. Every process they start sleeps for a finite time
and carries the mark, so the Go test finds any leak.
"""

import os
import subprocess
import threading
import time
import unittest

import lineage_client
from lineage_client import Client, Ended, LineageError

MARK = os.environ.get("LINEAGE_TEST_MARK", "")
SLEEP = "97." + MARK


def start_ticks(pid):
    """Field 22 of /proc/PID/stat, or None when the process is gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def state(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2:].split()[0]


def wait_until(cond, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


def wait_gone(pid, start, timeout=30):
    return wait_until(lambda: start_ticks(pid) != start, timeout)


def leave_script(mark):
    """The issue's command: prints, then leaves two sleepers holding its
    output, one setsid'd, one double-forked."""
    return "echo built; setsid sleep 90.%s & (sleep 91.%s &)" % (mark, mark)


_count = 0


def session_name(what):
    global _count
    _count += 1
    return "py-%s-%d-%d" % (what, os.getpid(), _count)


@unittest.skipUnless(os.environ.get("LINEAGE_SOCKET") and MARK, "needs a daemon: run through go test ./cmd/lineage -run TestPythonClient")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = Client()

    def leak(self, session, kind):
        """Runs a command in session that leaves a setsid-ed sleeper, and
        returns the sleeper's identity."""
        done = self.client.run(["sh", "-c", "setsid sleep %s >/dev/null 2>&1 & echo $!" % SLEEP],
                               session, kind=kind, capture_output=True, text=True, check=True)
        pid = int(done.stdout.strip())
        start = start_ticks(pid)
        self.assertIsNotNone(start, "the sleeper %d is not running" % pid)
        return pid, start

    def test_installed_package(self):
        # The venv's installed copy, not the source tree.
        self.assertIn("site-packages", lineage_client.__file__)
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(lineage_client.__file__), "py.typed")))

    def test_status(self):
        st = self.client.status()
        self.assertEqual(st["api"], 1)
        self.assertEqual(st["caller_uid"], os.getuid())

    def test_run_is_subprocess_run(self):
        s = session_name("run")
        done = self.client.run(["sh", "-c", "echo out; echo err >&2; exit 3"], s, kind="autonomous",
                               capture_output=True, text=True)
        self.assertEqual((done.returncode, done.stdout, done.stderr), (3, "out\n", "err\n"))
        self.assertEqual(done.args, ["sh", "-c", "echo out; echo err >&2; exit 3"])
        self.assertIsInstance(done, subprocess.CompletedProcess)
        with self.assertRaises(subprocess.CalledProcessError) as cm:
            self.client.run("exit 4", s, shell=True, check=True)
        self.assertEqual(cm.exception.returncode, 4)
        done = self.client.run(["cat"], s, input="fed\r\n", capture_output=True, text=True)
        self.assertEqual(done.stdout, "fed\n")
        done = self.client.run("pwd; echo $V", s, shell=True, cwd="/", env={"V": "set", "PATH": os.environ["PATH"]},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(done.stdout, b"/\nset\n")
        self.assertIsNone(done.stderr)
        with open(os.devnull, "rb") as null:
            done = self.client.run(["cat"], s, stdin=null, capture_output=True)
        self.assertEqual(done.stdout, b"")
        self.assertEqual(self.client.session(s)["kind"], "autonomous")
        self.client.session_close(s)

    def test_relative_socket_serves_commands_elsewhere(self):
        """A relative socket is made absolute when the client is made:
        a command run in another directory reaches the same daemon."""
        sock = os.environ["LINEAGE_SOCKET"]
        here = os.getcwd()
        os.chdir(os.path.dirname(sock))
        try:
            c = Client(socket=os.path.basename(sock))
        finally:
            os.chdir(here)
        self.assertEqual(c.socket, sock)
        s = session_name("relsock")
        done = c.run(["pwd"], s, cwd="/", capture_output=True, text=True)
        self.assertEqual((done.returncode, done.stdout, done.stderr), (0, "/\n", ""))
        c.session_close(s)

    def check_returns_past_leftovers(self, kind):
        s = session_name("hold-" + kind)
        with self.client.popen(leave_script(MARK), s, kind=kind, shell=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
            # The bound is from the command's own exit: wait for it first.
            self.assertTrue(wait_until(lambda: state(p.pid) == "Z"))
            began = time.monotonic()
            out, err = p.communicate()
            took = time.monotonic() - began
        self.assertLess(took, 1.0, "communicate took %.3fs past the command's exit" % took)
        self.assertEqual((p.returncode, out, err), (0, "built\n", ""))
        # Each holder is a sleeper, named by its argument: one may still be
        # setsid, before its exec of sleep, when it was named.
        self.assertEqual(sorted(h.argv[-1] for h in p.holders), ["90." + MARK, "91." + MARK])
        for h in p.holders:
            self.assertEqual(h.streams, ["stdout", "stderr"])
            self.assertEqual(start_ticks(h.pid), h.start)
        # run(), which returns what popen found, the same.
        done = self.client.run(leave_script(MARK), s, kind=kind, shell=True, capture_output=True, text=True)
        self.assertEqual(done.stdout, "built\n")
        self.assertEqual(len(done.holders), 2)
        sleepers = p.holders + done.holders
        ended = self.client.turn_end(s)
        reported = [o for o in ended.outcomes if o["result"] == "reported"]
        if kind == "autonomous":
            for h in sleepers:
                self.assertTrue(wait_gone(h.pid, h.start), "%s outlived the turn end" % h.argv)
        else:
            self.assertEqual(sorted(o["process"]["pid"] for o in reported), sorted(h.pid for h in sleepers))
            for h in sleepers:
                self.assertEqual(start_ticks(h.pid), h.start, "%s died at an interactive turn end" % h.argv)
        self.client.session_close(s)
        for h in sleepers:
            self.assertTrue(wait_gone(h.pid, h.start))

    def test_returns_past_leftovers_autonomous(self):
        self.check_returns_past_leftovers("autonomous")

    def test_returns_past_leftovers_interactive(self):
        self.check_returns_past_leftovers("interactive")

    def test_one_mib_every_byte(self):
        s = session_name("mib")
        script = "head -c 1048576 /dev/zero | tr '\\0' x; echo; " + leave_script(MARK)
        done = self.client.run(script, s, kind="autonomous", shell=True, capture_output=True)
        self.assertEqual(done.stdout, b"x" * (1 << 20) + b"\nbuilt\n")
        self.assertEqual(len(done.holders), 2)
        self.client.session_close(s)
        for h in done.holders:
            self.assertTrue(wait_gone(h.pid, h.start))

    def test_timeout_ends_the_whole_lineage(self):
        s = session_name("timeout")
        bystander = self.leak(s, "interactive")
        began = time.monotonic()
        with self.assertRaises(subprocess.TimeoutExpired) as cm:
            self.client.run("echo started; setsid sleep %s & echo $!; wait" % SLEEP, s, shell=True,
                            capture_output=True, timeout=1)
        self.assertLess(time.monotonic() - began, 15)
        out = cm.exception.output
        self.assertTrue(out.startswith(b"started\n"), out)
        grandchild = int(out.split()[1])
        self.assertIsNone(start_ticks(grandchild), "the setsid'd grandchild outlived the timeout")
        self.assertEqual(start_ticks(bystander[0]), bystander[1], "the timeout touched another root")
        self.client.session_close(s)
        self.assertTrue(wait_gone(*bystander))

    def test_popen_streams_lines(self):
        s = session_name("stream")
        p = self.client.popen(["sh", "-c", "echo a; sleep 0.2; echo b; setsid sleep %s &" % SLEEP], s,
                              kind="autonomous", stdout=subprocess.PIPE, text=True, hold_delay=0.3)
        lines = [line for line in p.stdout]
        self.assertEqual(lines, ["a\n", "b\n"])
        self.assertEqual(p.wait(), 0)
        self.assertEqual([h.streams for h in p.holders], [["stdout"]])
        p.close()
        self.client.session_close(s)
        self.assertTrue(wait_gone(p.holders[0].pid, p.holders[0].start))

    def test_leak_reported_at_turn_end_reaped_at_close(self):
        s = session_name("leak")
        pid, start = self.leak(s, "interactive")
        ended = self.client.turn_end(s)
        self.assertIsInstance(ended, Ended)
        mine = [o for o in ended.outcomes if o["process"] == {"pid": pid, "start": start}]
        self.assertEqual([o["result"] for o in mine], ["reported"], ended)
        self.assertEqual(start_ticks(pid), start, "an interactive turn end killed the sleeper")
        closed = self.client.session_close(s)
        mine = [o for o in closed.outcomes if o["process"]["pid"] == pid]
        self.assertEqual(len(mine), 1, closed)
        self.assertIn(mine[0]["result"], ("terminated", "killed"))
        self.assertIn("TERM", mine[0]["signals"])
        self.assertTrue(wait_gone(pid, start), "the sleeper outlived its session")

    def test_keep_with_ttl(self):
        s = session_name("keep")
        pid, start = self.leak(s, "autonomous")
        # Long enough for the turn end to come first even on a loaded machine.
        ttl = 5
        kept_at = time.monotonic()
        rule = self.client.keep((pid, start), ttl=ttl)
        self.assertIn("%d@%d" % (pid, start), rule["rule"])
        ended = self.client.turn_end(s)
        self.assertEqual([o["result"] for o in ended.outcomes if o["process"]["pid"] == pid], ["kept"])
        self.assertEqual(start_ticks(pid), start)
        time.sleep(max(0, kept_at + ttl + 0.2 - time.monotonic()))
        closed = self.client.session_close(s)
        self.assertIn(pid, [o["process"]["pid"] for o in closed.outcomes if o["result"] in ("terminated", "killed")])
        self.assertTrue(wait_gone(pid, start))

    def test_a_session_with_an_owner_and_keeps_closes_when_its_owner_ends(self):
        s = session_name("owned")
        owner = subprocess.Popen(["sleep", SLEEP])
        try:
            start = start_ticks(owner.pid)
            opened = self.client.open_session(s, kind="autonomous", owner=(owner.pid, start),
                                              keep=["exe:/usr/bin/redis-server"], self_close=True)
            self.assertEqual(opened["owner"], {"pid": owner.pid, "start": start})
            self.assertEqual([k["rule"] for k in opened["keeps"]], ["exe:/usr/bin/redis-server"])
            self.assertTrue(opened["self_close"])
        finally:
            owner.kill()
            owner.wait()
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.session(s)
            except LineageError as e:
                self.assertEqual(e.code, "not_found")
                break
            self.assertLess(time.monotonic(), deadline, "the session is still open after its owner ended")
            time.sleep(0.02)
        with self.assertRaises(TypeError):
            self.client.open_session(session_name("one-string"), keep="exe:/usr/bin/redis-server")

    def test_events_end_when_the_session_closes(self):
        s = session_name("events")
        self.client.open_session(s, kind="autonomous")
        got = []
        with self.client.events(s, timeout=30) as stream:
            header = next(stream)
            self.assertEqual(header["schema"], "lineage-record")
            self.assertEqual(header["build"]["version"], header["lineage"])
            t = threading.Thread(target=self.client.run, args=(["sh", "-c", "/bin/true " + MARK], s))
            t.start()
            for ev in stream:
                got.append(ev)
                if ev["kind"] == "exec" and ev.get("argv") == ["/bin/true", MARK]:
                    break
            t.join()
            self.client.session_close(s)
            rest = list(stream)  # ends: the session closed
        kinds = {ev["kind"] for ev in got}
        self.assertTrue({"fork", "exec"} <= kinds, got)
        self.assertEqual(rest[-1]["kind"], "end", rest)
        self.assertEqual(rest[-1]["reason"], "session %s closed" % s)

    def test_run_from_an_armed_process(self):
        """Under the pytest plugin the test process is armed: a command it
        runs through the client is still the root of the session it names,
        and what the armed process forks otherwise is the armed session's."""
        armed, mine = session_name("armed"), session_name("asked")
        c = Client(keepalive=True)
        c.arm(armed, kind="interactive")
        try:
            done = c.run(["sh", "-c", "setsid sleep %s >/dev/null 2>&1 & echo $!" % SLEEP], mine,
                         kind="autonomous", capture_output=True, text=True, check=True)
            other = subprocess.Popen(["sleep", SLEEP])
        finally:
            c.disarm()
        pid = int(done.stdout)
        asked = [o["process"]["pid"] for o in c.report(mine).outcomes]
        theirs = [o["process"]["pid"] for o in c.report(armed).outcomes]
        self.assertEqual(asked, [pid])
        self.assertEqual(theirs, [other.pid])
        c.session_close(mine)
        c.session_close(armed)
        other.wait()
        self.assertIsNone(start_ticks(pid))
        c.close()

    def test_bad_input_raises_and_changes_nothing(self):
        with self.assertRaises(LineageError) as cm:
            self.client.keep("not-an-identity")
        self.assertEqual((cm.exception.code, cm.exception.status), ("invalid", 400))
        with self.assertRaises(LineageError) as cm:
            self.client.turn_end(session_name("none"))
        self.assertEqual(cm.exception.code, "not_found")
        marker = os.path.join(os.environ.get("TMPDIR", "/tmp"), "lineage-py-" + MARK)
        for bad in ("-starts-with-dash", "has space", "x" * 65):
            with self.assertRaises(LineageError) as cm:
                self.client.run(["touch", marker], bad)
            self.assertEqual(cm.exception.code, "invalid", bad)
        self.assertFalse(os.path.exists(marker), "a command ran for a bad session")
        with self.assertRaises(LineageError) as cm:
            Client(socket="/nonexistent/lineage.sock").status()
        self.assertEqual(cm.exception.code, "unavailable")
        with self.assertRaises(ValueError):
            self.client.run([], session_name("empty"))
        # An empty session opens none (the daemon would name one) and runs
        # nothing.
        sessions = self.client.status()["sessions"]
        for start in (self.client.run, self.client.popen):
            with self.assertRaises(ValueError) as cm:
                start(["touch", marker], "")
            self.assertIn("no session", str(cm.exception))
        self.assertEqual(self.client.status()["sessions"], sessions, "a session was opened")
        self.assertFalse(os.path.exists(marker), "a command ran for an empty session")
        for call in (self.client.session, self.client.turn_end, self.client.session_close, self.client.report):
            with self.assertRaises(ValueError):
                call("")
            # No id reaches another endpoint: dots alone are an id.
            for dots in (".", ".."):
                with self.assertRaises(LineageError) as cm:
                    call(dots)
                self.assertEqual(cm.exception.code, "not_found", (call.__name__, dots, cm.exception))
        with self.assertRaises(TypeError):
            self.client.run(["true"], session_name("exe"), executable="/bin/true")
        with self.assertRaises(ValueError):
            self.client.run(["true"], session_name("both"), input=b"x", stdin=subprocess.PIPE)

    def test_a_session_of_another_kind_runs_nothing(self):
        name = session_name("kind")
        self.client.open_session(name, kind="interactive")
        marker = os.path.join(os.environ.get("TMPDIR", "/tmp"), "lineage-py-kind-" + MARK)
        try:
            with self.assertRaises(LineageError) as cm:
                self.client.run(["touch", marker], name, kind="autonomous")
            self.assertEqual(cm.exception.code, "conflict")
            self.assertIn("is interactive, not autonomous", cm.exception.message)
            self.assertFalse(os.path.exists(marker), "a command ran in a session of another kind")
            self.assertEqual(self.client.run(["true"], name, kind="interactive").returncode, 0, "its own kind runs")
        finally:
            self.client.session_close(name)

    def test_another_uids_session_runs_nothing(self):
        foreign = os.environ.get("LINEAGE_TEST_FOREIGN_SESSION")
        self.assertTrue(foreign, "no LINEAGE_TEST_FOREIGN_SESSION: a session uid 65534 opened")
        marker = os.path.join(os.environ.get("TMPDIR", "/tmp"), "lineage-py-foreign-" + MARK)
        with self.assertRaises(LineageError) as cm:
            self.client.run(["touch", marker], foreign)
        self.assertEqual(cm.exception.code, "conflict")
        self.assertIn("uid 65534", cm.exception.message)
        self.assertFalse(os.path.exists(marker), "a command ran in another uid's session")


class UnusableSocketTest(unittest.TestCase):
    """No daemon needed: a socket this uid may not use, a backlog full."""

    def test_a_socket_this_uid_may_not_use_says_so(self):
        # A real EACCES: a listening socket of mode 0600 that uid 65534
        # connects to (root may use any socket, so root forks a child
        # that becomes 65534; the module is loaded already).
        import shutil
        import socket
        import tempfile
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.chmod(d, 0o711)
        path = os.path.join(d, "lineage.sock")
        ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(ln.close)
        ln.bind(path)
        ln.listen(1)
        os.chmod(path, 0o600 if os.geteuid() == 0 else 0)
        uid = 65534 if os.geteuid() == 0 else os.getuid()
        for keepalive in (False, True):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: one connect, then gone
                code = 1
                try:
                    os.close(r)
                    if os.geteuid() == 0:
                        os.setgroups([])
                        os.setgid(uid)
                        os.setuid(uid)
                    try:
                        Client(path, keepalive=keepalive).status()
                        os.write(w, b"answered")
                    except LineageError as e:
                        os.write(w, ("%s\n%s" % (e.code, e.message)).encode())
                    code = 0
                finally:
                    os._exit(code)
            os.close(w)
            with os.fdopen(r) as f:
                said = f.read()
            _, status = os.waitpid(pid, 0)
            self.assertEqual(status, 0, "the child failed: %r" % said)
            code, _, message = said.partition("\n")
            self.assertEqual(code, "unavailable", said)
            self.assertIn("uid %d may not use the socket %s" % (uid, path), message)
            self.assertIn("--socket-group", message)
            self.assertNotIn("no daemon answers", message)

    def _full_backlog(self):
        """A listening socket that accepts nothing yet, its backlog full of
        the connections returned."""
        import shutil
        import socket
        import tempfile
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "lineage.sock")
        ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(ln.close)
        ln.bind(path)
        ln.listen(0)
        fillers = []
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(path)
            except BlockingIOError:
                s.close()
                break
            self.addCleanup(s.close)
            fillers.append(s)
        return ln, path, fillers

    def test_a_full_backlog_is_waited_for(self):
        # A connect with a timeout to a full backlog is refused at once
        # (EAGAIN); the client tries again until the daemon accepts.
        import threading
        import time
        ln, path, fillers = self._full_backlog()

        def serve():
            time.sleep(0.3)
            for s in fillers:
                s.close()  # each is accepted at end of file
            while True:
                c, _ = ln.accept()
                with c:
                    c.settimeout(5)
                    req = c.recv(65536)
                    if not req:
                        continue  # one of the connections that filled it
                    body = b'{"api": 1, "reaping": "on"}'
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
                    return

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        start = time.monotonic()
        got = Client(path, timeout=5).status()
        self.assertEqual(got, {"api": 1, "reaping": "on"})
        self.assertGreaterEqual(time.monotonic() - start, 0.25)
        t.join(5)
        self.assertFalse(t.is_alive())

    def test_a_backlog_that_stays_full_fails_within_the_timeout(self):
        import time
        _, path, _ = self._full_backlog()
        start = time.monotonic()
        with self.assertRaises(LineageError) as cm:
            Client(path, timeout=0.4).status()
        took = time.monotonic() - start
        self.assertEqual(cm.exception.code, "unavailable")
        self.assertIn("no daemon answers", cm.exception.message)
        self.assertGreaterEqual(took, 0.35)
        self.assertLess(took, 3)


if __name__ == "__main__":
    unittest.main()
