"""The pytest plugin's allow rule on the argv a teardown sees, a wrapper's
among them: it needs no daemon."""

import unittest

from lineage_client.pytest_plugin import _allowed


class AllowTest(unittest.TestCase):
    def test_a_name_is_the_program_of_any_word(self):
        # Between a wrapper's fork and its exec, the process shows the
        # wrapper's argv: the allowed program is a later word.
        for argv in (["sleep", "5"], ["/usr/bin/sleep", "5"], ["setsid", "sleep", "5"],
                     ["setsid", "-f", "/bin/sleep", "5"], ["nohup", "sleep", "5"],
                     ["env", "A=1", "sleep", "5"], ["timeout", "9", "sleep", "5"]):
            self.assertTrue(_allowed("sleep", argv), argv)
        # A word with a space is a script, not a program; a name is whole.
        for argv in (["sleepy", "5"], ["sh", "-c", "cd /tmp && ./sleep 5"], ["tail", "sleep.log"], []):
            self.assertFalse(_allowed("sleep", argv), argv)
        self.assertTrue(_allowed("/usr/bin/sleep", ["setsid", "/usr/bin/sleep", "5"]))
        self.assertFalse(_allowed("/usr/bin/sleep", ["setsid", "sleep", "5"]))

    def test_globs_lists_and_callables(self):
        self.assertTrue(_allowed("*sleep 31*", ["setsid", "sleep", "31"]))
        self.assertFalse(_allowed("sleep 31*", ["setsid", "sleep", "31"]))
        self.assertTrue(_allowed(["redis-server", "sleep"], ["setsid", "sleep", "5"]))
        self.assertFalse(_allowed(["redis-server", "sleep 5"], ["setsid", "sleep", "5"]))
        self.assertTrue(_allowed(lambda argv: argv[-1] == "5", ["setsid", "sleep", "5"]))
        self.assertTrue(_allowed(True, ["anything"]))
        self.assertFalse(_allowed(None, ["sleep"]))
        self.assertFalse(_allowed(False, ["sleep"]))


if __name__ == "__main__":
    unittest.main()
