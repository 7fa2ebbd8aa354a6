"""The sample suite's module fixture: a server the fixture starts and never
stops. Its test is alone in its module, so pytest finalizes the fixture at
that test's teardown however pytest-xdist orders the suite."""

import subprocess

import pytest

from test_sample import running, sleep


@pytest.fixture(scope="module")
def server():
    p = subprocess.Popen(["sleep", sleep(94)], start_new_session=True)
    running(94)
    yield p
    # The server is left running.


def test_uses_server(server):
    assert server.poll() is None
