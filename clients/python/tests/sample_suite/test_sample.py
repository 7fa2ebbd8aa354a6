"""The pytest plugin's sample suite (run by cmd/lineage's TestPytestPlugin,
not by unittest): five tests here and one in test_server.py (six: four of which leave a process behind in a way
of their own, one clean, one whose leftover is allowed). Each process sleeps
for a finite time and carries LINEAGE_TEST_MARK, its whole seconds naming
which test or fixture started it."""

import os
import subprocess
import time

import pytest

MARK = os.environ["LINEAGE_TEST_MARK"]


def sleep(seconds):
    return "%d.%s" % (seconds, MARK)


def running(seconds):
    """Waits, as a test waits for the server it started, until the sleep
    of that many seconds runs (its setsid or shell wrapper exec'd it)."""
    want = ("sleep\0%s\0" % sleep(seconds)).encode()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if f.read() == want:
                        return
            except OSError:
                pass
        time.sleep(0.005)
    raise AssertionError("sleep %s never ran" % sleep(seconds))


def test_setsid_leak():
    subprocess.run(["sh", "-c", "setsid sleep %s >/dev/null 2>&1 &" % sleep(91)], check=True)
    running(91)


def test_double_fork_daemon():
    # A daemon's start: fork, setsid, fork again, the middle one exits.
    subprocess.run(["sh", "-c", "(setsid sh -c 'sleep %s >/dev/null 2>&1 &' &)" % sleep(92)], check=True)
    running(92)


@pytest.fixture
def helper():
    p = subprocess.Popen(["sleep", sleep(93)], start_new_session=True)
    running(93)
    yield p
    # Never stopped.


def test_function_fixture_leak(helper):
    assert helper.poll() is None


def test_clean():
    p = subprocess.Popen(["sleep", sleep(95)])
    p.terminate()
    p.wait()
    subprocess.run(["true"], check=True)


@pytest.mark.lineage(allow="sleep")
def test_allowed_leak():
    subprocess.run(["sh", "-c", "setsid sleep %s >/dev/null 2>&1 &" % sleep(96)], check=True)
    running(96)
