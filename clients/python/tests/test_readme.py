"""The README's examples, run as written against the daemon the Go test
started (see test_client.py), each checked for what it says it does."""

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

from test_client import start_ticks, wait_gone

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")


def blocks(lang):
    with open(README) as f:
        return re.findall(r"```%s\n(.*?)```" % lang, f.read(), re.S)


def examples():
    """The client examples: the Python blocks that are not a test file."""
    return [b for b in blocks("python") if not b.startswith("# test_")]


@unittest.skipUnless(os.environ.get("LINEAGE_SOCKET"), "needs a daemon: run through go test ./cmd/lineage -run TestPythonClient")
class ReadmeTest(unittest.TestCase):
    def run_example(self, i):
        ns = {}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(examples()[i], "README.md example %d" % i, "exec"), ns)
        return ns, out.getvalue()

    def test_there_are_four(self):
        self.assertEqual(len(examples()), 4)

    def test_pytest_plugin(self):
        """The README's ini, test file and command line, as written: the
        daemon leaves reaped, the meant one spared (then killed here)."""
        (ini,) = blocks("ini")
        (tests,) = [b for b in blocks("python") if b.startswith("# test_")]
        (command,) = [b for b in blocks("sh") if b.startswith("pytest ")]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "pytest.ini"), "w") as f:
                f.write(ini)
            with open(os.path.join(d, tests.splitlines()[0][2:]), "w") as f:
                f.write(tests)
            argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"] + command.split()[1:]
            done = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            props = {}
            for case in ET.parse(os.path.join(d, "report.xml")).iter("testcase"):
                props[case.get("name")] = [(p.get("name"), p.get("value")) for p in case.iter("property")]
        self.assertIn("left processes behind", done.stdout)
        (leak,) = props["test_leaves_a_daemon"]
        (kept,) = props["test_means_to_leave_it"]
        self.assertEqual(leak[0], "lineage_leak")
        self.assertRegex(leak[1], r"(terminated|killed)\)$")
        self.assertEqual(kept[0], "lineage_allowed")
        self.assertRegex(kept[1], r"sleep 31 .*spared\)$")
        pid, start = (int(x) for x in kept[1].split()[0].split("@"))
        self.assertEqual(start_ticks(pid), start, "the allowed sleeper was not spared")
        fd = os.pidfd_open(pid)
        try:
            if start_ticks(pid) == start:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        finally:
            os.close(fd)
        self.assertTrue(wait_gone(pid, start))
        pid, start = (int(x) for x in leak[1].split()[0].split("@"))
        self.assertTrue(wait_gone(pid, start), "the daemon's sleeper outlived --lineage-reap")

    def test_run(self):
        ns, out = self.run_example(0)
        self.assertTrue(out.startswith("built\n"), out)
        holders = ns["done"].holders
        # Each holder is a sleeper, named by its argument: one may still be
        # setsid, before its exec of sleep, when it was named.
        self.assertEqual(sorted(h.argv[-1] for h in holders), ["90", "91"])
        self.assertEqual(sorted(o["result"] for o in ns["ended"].outcomes), ["terminated", "terminated"])
        for h in holders:
            self.assertTrue(wait_gone(h.pid, h.start))

    def test_timeout(self):
        ns, out = self.run_example(1)
        self.assertEqual(out, "b'started\\n'\n")

    def test_stream(self):
        ns, out = self.run_example(2)
        self.assertEqual(out.splitlines()[:2], ["got one", "got two"])
        holders = ns["p"].holders
        self.assertEqual([h.argv[-1] for h in holders], ["93"])
        self.assertTrue(wait_gone(holders[0].pid, holders[0].start))

    def test_events(self):
        ns, out = self.run_example(3)
        lines = out.splitlines()
        self.assertIn("exec ['true']", lines)
        self.assertEqual(lines[-1], "end ")


if __name__ == "__main__":
    unittest.main()
