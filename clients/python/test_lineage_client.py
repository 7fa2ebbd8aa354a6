"""Tests of lineage_client against a real daemon.

They need one: cmd/lineage/python_client_e2e_test.go (run by `make test`)
starts it and runs `python3 -m unittest` here with LINEAGE_SOCKET,
LINEAGE_BIN and LINEAGE_TEST_MARK set. Every process they start sleeps for
a finite time and carries the mark, so the Go test finds any leak.
"""

import os
import threading
import time
import unittest

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


def wait_gone(pid, start, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if start_ticks(pid) != start:
            return True
        time.sleep(0.02)
    return False


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
        with self.assertRaises(Exception) as cm:
            self.client.run("exit 4", s, shell=True, check=True)
        self.assertEqual(cm.exception.returncode, 4)
        self.assertEqual(self.client.session(s)["kind"], "autonomous")
        self.client.session_close(s)

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

    def test_events(self):
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
        kinds = {ev["kind"] for ev in got}
        self.assertTrue({"fork", "exec"} <= kinds, got)
        self.client.session_close(s)

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


if __name__ == "__main__":
    unittest.main()
