"""The pytest plugin's lines for people: a leftover's argv as one line a
shell reads back as the same words, with nothing a process put in its argv
reaching the terminal raw, and the summary's title. They need no daemon,
only bash."""

import subprocess
import unittest

from lineage_client.pytest_plugin import _ALLOWED, _FIXTURE_LEAK, _LEAK, _command_line, _describe, _summary_title

ARGVS = [
    ["sleep", "30"],
    ["make", "-j3", "CC=gcc", "naïve"],
    ["sh", "-c", "a | b", ""],
    ["echo", "it's"],
    ["python3", "-c", "import os\nos.fork()\n"],
    ["printf", "\x1b]0;owned\x07\x1b[2J"],
    ["x", "\x01a", "\x7f", "\u0085", "\u200bb", "\u2028", "tab\there"],
    ["echo", "back\\slash", "quo'te\x1b"],
    ["FOO=1", "x"],
    ["time", "x"],
    ["ünïcode", "日本語"],
]


class CommandLineTest(unittest.TestCase):
    def test_the_lines_the_cli_writes(self):
        # The same lines lineage.CommandLine writes for these argvs.
        self.assertEqual(_command_line(["sleep", "30"]), "sleep 30")
        self.assertEqual(_command_line(["sh", "-c", "a | b", ""]), "sh -c 'a | b' ''")
        self.assertEqual(_command_line(["echo", "it's"]), "echo 'it'\\''s'")
        self.assertEqual(_command_line(["python3", "-c", "a\nb"]), "python3 -c $'a\\nb'")
        self.assertEqual(_command_line(["x", "\x1bc"]), "x $'\\x1b'$'c'")
        self.assertEqual(_command_line(["x", "\x1bz"]), "x $'\\x1bz'")
        self.assertEqual(_command_line(["FOO=1", "x"]), "'FOO=1' x")
        self.assertEqual(_command_line(["x", "FOO=1"]), "x FOO=1")
        self.assertEqual(_command_line([]), "?")

    def test_nothing_raw_reaches_the_terminal(self):
        for argv in ARGVS:
            line = _command_line(argv)
            self.assertTrue(line.isprintable(), (argv, line))

    def test_a_shell_reads_back_the_same_words(self):
        for argv in ARGVS:
            line = _command_line(argv)
            out = subprocess.run(["bash", "-c", "printf '%s\\0' " + line], capture_output=True, check=True).stdout
            self.assertEqual(out.split(b"\0")[:-1], [a.encode() for a in argv], line)

    def test_describe_quotes_the_argv(self):
        o = {"process": {"pid": 42, "start": 7}, "argv": ["sh", "-c", "sleep 9\n"], "age_ns": 1.5e9,
             "result": "terminated"}
        self.assertEqual(_describe(o, True), "42@7 sh -c $'sleep 9\\n' (age 1.50s, terminated)")


class SummaryTitleTest(unittest.TestCase):
    def test_counts_what_leaked_apart_from_what_was_allowed(self):
        fixture = "fixture svc (module scope, test_x.py): 9@9 sleep 9 (age 0.10s, terminated)"
        leak, allowed = "1@1 sleep 1 (age 0.10s, terminated)", "2@2 sleep 2 (age 0.10s, spared)"
        cases = [
            ([("t1", _LEAK, leak), ("t1", _LEAK, leak), ("t2", _LEAK, leak), ("t3", _FIXTURE_LEAK, fixture)],
             "lineage: 2 tests and 1 fixture left processes behind"),
            ([("t1", _LEAK, leak)], "lineage: 1 test left processes behind"),
            ([("t1", _FIXTURE_LEAK, fixture), ("t2", _FIXTURE_LEAK, fixture)],
             "lineage: 1 fixture left processes behind"),
            ([("t1", _LEAK, leak), ("t2", _ALLOWED, allowed), ("t3", _ALLOWED, allowed)],
             "lineage: 1 test left processes behind; 2 allowed processes outlived their test too"),
            ([("t2", _ALLOWED, allowed)], "lineage: no test left a process behind; 1 allowed process outlived its test"),
        ]
        for leaks, want in cases:
            self.assertEqual(_summary_title(leaks), want)


if __name__ == "__main__":
    unittest.main()
