"""The README's examples, run as written against the daemon the Go test
started (see test_client.py), each checked for what it says it does."""

import contextlib
import io
import os
import re
import unittest

from test_client import wait_gone

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")


def examples():
    with open(README) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


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

    def test_run(self):
        ns, out = self.run_example(0)
        self.assertTrue(out.startswith("built\n"), out)
        holders = ns["done"].holders
        self.assertEqual(sorted(h.argv for h in holders), [["sleep", "90"], ["sleep", "91"]])
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
        self.assertEqual([h.argv for h in holders], [["sleep", "93"]])
        self.assertTrue(wait_gone(holders[0].pid, holders[0].start))

    def test_events(self):
        ns, out = self.run_example(3)
        lines = out.splitlines()
        self.assertIn("exec ['true']", lines)
        self.assertEqual(lines[-1], "end ")


if __name__ == "__main__":
    unittest.main()
