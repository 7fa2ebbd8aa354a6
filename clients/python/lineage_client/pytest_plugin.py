"""pytest --lineage: every process a test starts is the test's, exactly.

The plugin arms the pytest process (each pytest-xdist worker its own) with
the daemon for one session per test: from then on the kernel makes every
process it forks, from any thread, a new root of that session before the
process runs a single instruction, and whatever that root forks, however it
detaches (setsid, a double fork, a daemon), is its lineage. While a module-,
class- or session-scoped fixture is set up or torn down, the arm is the
fixture's own session instead, so its server is the fixture's, not the
first test's. Function-scoped fixtures run armed for the test.

At each test's teardown (fixtures finalized), the test's session is asked
what still lives: each leftover is reported with identity, argv and age in
the terminal summary and as a JUnit XML property (``lineage_leak``;
``lineage_fixture_leak`` for a fixture's, ``lineage_allowed`` for what
``@pytest.mark.lineage(allow=...)`` spares). ``--lineage-reap`` ends the
leftovers there and then (the session's close: TERM, the daemon's grace,
KILL, by identity), sparing the allowed; ``--lineage-fail`` fails a test
that leaks (an error at its teardown naming what it left). Without either,
nothing is signalled: the leftovers run on, untracked at the end.

Attribution is by lineage and identity only, never by time or name. It
needs a reachable daemon with the bpf backend; without one, the plugin says
so once and the suite runs unchanged.

    pytest --lineage                      # or lineage = true in the ini
    pytest --lineage --lineage-reap -n 4
    @pytest.mark.lineage(allow="redis-server")
"""

from __future__ import annotations

import fnmatch
import os
import unicodedata
from typing import Any, Iterator

import pytest

from ._client import Client, LineageError

_LEAK = "lineage_leak"
_FIXTURE_LEAK = "lineage_fixture_leak"
_ALLOWED = "lineage_allowed"
_KEYS = (_LEAK, _FIXTURE_LEAK, _ALLOWED)

# Results of a reap's outcome that mean the process was alive when the
# test ended (exited and vanished ones ended on their own first).
_LEFT = ("reported", "terminated", "killed", "survived", "refused", "kept")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lineage", "process lineage (lineage serve)")
    group.addoption("--lineage", action="store_true", default=False,
                    help="attribute every process a test starts to it, and report what it leaves behind")
    group.addoption("--lineage-reap", action="store_true", default=False,
                    help="end each test's leftovers at its teardown (implies --lineage)")
    group.addoption("--lineage-fail", action="store_true", default=False,
                    help="fail a test that leaves processes behind (implies --lineage)")
    group.addoption("--lineage-socket", default=None, metavar="PATH",
                    help="the daemon's socket (default: $LINEAGE_SOCKET, else /run/lineage/lineage.sock)")
    parser.addini("lineage", type="bool", default=False, help="as --lineage")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "lineage(allow=...): processes the test means to leave behind, spared and not counted as leaks: "
        "True for all, or a program's name (of any word of argv), a glob of the command line, or a list of them, "
        "or a callable(argv)")
    opt = config.getoption
    if not (opt("lineage") or opt("lineage_reap") or opt("lineage_fail") or config.getini("lineage")):
        return
    config.pluginmanager.register(LineagePlugin(config), "lineage-plugin")


def _allowed(allow: Any, argv: list[str]) -> bool:
    """Whether the marker's allow spares a process with argv, as it is at
    teardown. A name (or a path) is matched against every word of argv,
    itself and its basename: the process's program, or the program a
    wrapper (setsid, nohup, env, timeout) is about to exec, since a process
    between the wrapper's fork and its exec shows the wrapper's argv. A
    word with a space in it (a shell's script) names no program. A glob is
    matched against the whole command line."""
    if allow is True:
        return True
    if not allow:
        return False
    if callable(allow):
        return bool(allow(argv))
    patterns = [allow] if isinstance(allow, str) else list(allow)
    words = [w for w in argv if w and not any(c.isspace() for c in w)]
    programs = set(words) | {os.path.basename(w) for w in words}
    line = " ".join(argv)
    return any(p in programs or fnmatch.fnmatchcase(line, p) for p in patterns)


def _describe(outcome: dict[str, Any], reaping: bool) -> str:
    """One leftover, for people: identity, command line, age, fate."""
    proc = outcome["process"]
    fate = outcome["result"]
    if fate == "reported":
        fate = "left running"
    elif fate == "kept":
        fate = "spared"
    return "%d@%d %s (age %.2fs, %s)" % (proc["pid"], proc["start"], _command_line(outcome.get("argv") or []),
                                         outcome.get("age_ns", 0) / 1e9, fate)


# The words a shell reads as its own in a command's place.
_RESERVED = frozenset(("case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function",
                       "if", "in", "select", "then", "time", "until", "while"))
_BARE_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:,+@%=")
_CONTROL_LETTERS = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r"}


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf") or ch in "\u2028\u2029"


def _command_line(argv: list[str]) -> str:
    """argv for people, as one line that a POSIX shell with $'...' reads
    back as the same words, as the lineage CLI writes it: a bare word where
    nothing in it means anything to a shell, else single-quoted, else (with
    a control or format character) $'...' with such characters escaped.
    Nothing a leftover put in its argv reaches the terminal raw."""
    if not argv:
        return "?"
    words = []
    for i, a in enumerate(argv):
        if any(_unsafe(c) for c in a):
            words.append(_dollar_quote(a))
        elif a and all(c in _BARE_ASCII or (ord(c) > 127 and not c.isspace()) for c in a) \
                and (i > 0 or ("=" not in a and a not in _RESERVED)):
            words.append(a)
        else:
            words.append("'" + a.replace("'", "'\\''") + "'")
    return " ".join(words)


def _dollar_quote(a: str) -> str:
    out = ["$'"]
    hexed = False  # the last thing written is a \xNN
    for c in a:
        if _unsafe(c):
            if c in _CONTROL_LETTERS:
                out.append("\\" + _CONTROL_LETTERS[c])
                hexed = False
            else:
                out.extend("\\x%02x" % b for b in c.encode("utf-8", "surrogateescape"))
                hexed = True
            continue
        if hexed and c in "0123456789abcdefABCDEF":
            out.append("'$'")  # \xNN then a hex digit: close the quote and open another
        hexed = False
        out.append("\\" + c if c in "\\'" else c)
    out.append("'")
    return "".join(out)


class _Owner:
    """A test's or a fixture's session and what the plugin knows of it."""

    def __init__(self, session: str, label: str, allow: Any = None) -> None:
        self.session = session
        self.label = label
        self.allow = allow


class LineagePlugin:
    """The plugin's state in one pytest process (a worker under xdist)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reap = bool(config.getoption("lineage_reap"))
        self.fail = bool(config.getoption("lineage_fail"))
        self.kind = "autonomous" if self.reap else "interactive"
        self.client = Client(socket=config.getoption("lineage_socket"), keepalive=True)
        worker = getattr(config, "workerinput", None)
        self.worker = worker["workerid"] if worker else "main"
        # The controller of an xdist run runs no test: it only reports.
        self.controller = worker is None and bool(getattr(config.option, "numprocesses", None))
        self.prefix = "pt-%s-%d" % (self.worker, os.getpid())
        self.count = 0
        self.problem: str | None = None
        self.said = False
        # The arm's stack: the test's owner, then fixtures' being set up.
        self.stack: list[_Owner] = []
        self.armed: str | None = None
        self.item: pytest.Item | None = None
        self.fixtures: dict[int, _Owner] = {}
        self.left_open: list[str] = []
        # A test's session that ended clean, for the next test.
        self.reusable: str | None = None
        # What the summary shows: (nodeid, [property values]) in order.
        self.leaks: list[tuple[str, str, str]] = []
        self.check()

    # The daemon.

    def check(self) -> None:
        try:
            st = self.client.status()
        except LineageError as e:
            self.problem = "no lineage daemon reachable at %s (%s)" % (self.client.socket, e.message)
            return
        if st.get("backend") == "proc":
            self.problem = ("the daemon at %s tracks with the proc backend, which can't arm a process "
                            "(a poller sees a fork after it happened)" % self.client.socket)

    def say_once(self) -> None:
        if self.problem and not self.said and not getattr(self.config, "workerinput", None):
            self.said = True
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            msg = "lineage: %s: the tests run without process attribution" % self.problem
            if tr is not None:
                tr.write_line(msg, yellow=True)

    @property
    def active(self) -> bool:
        return self.problem is None and not self.controller

    def next_session(self, tag: str) -> str:
        self.count += 1
        return "%s-%s%d" % (self.prefix, tag, self.count)

    def arm(self, owner: _Owner | None) -> None:
        """Arms this process for owner's session (or disarms it)."""
        session = owner.session if owner is not None else None
        if session == self.armed:
            return
        try:
            if owner is None:
                self.client.disarm()
            else:
                self.client.arm(owner.session, kind=self.kind, label=owner.label[:256])
            self.armed = session
        except LineageError as e:
            if owner is None and e.code == "not_found":
                self.armed = None
                return
            self.problem = "arming failed (%s)" % e
            self.say_once()

    def end(self, owner: _Owner, reuse: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Ends owner's session as the options say: its leftovers and the
        allowed among them. With reuse (a test's session), a session that
        ends with nothing left in it serves the next test: its turn end
        forgot its roots, and the arm stays, so a clean test costs one
        call."""
        was_armed = self.armed == owner.session
        if self.reap and owner.allow:
            for o in self.client.report(owner.session).outcomes:
                if _allowed(owner.allow, o.get("argv") or []):
                    self.client.keep(o["process"])
        if reuse:
            # A turn end: an autonomous session's leftovers are reaped
            # (--lineage-reap), an interactive one's reported; roots with
            # nothing left are forgotten.
            outcomes = self.client.turn_end(owner.session).outcomes
        elif self.reap:
            outcomes = self.client.session_close(owner.session).outcomes  # disarms too
        else:
            outcomes = self.client.report(owner.session).outcomes
        live = [o for o in outcomes if o.get("result") in ("reported", "kept", "survived", "refused")]
        if reuse and not live:
            self.reusable = owner.session
        elif reuse and self.reap:
            # What it keeps stays its: a fresh session for the next test.
            self.client.session_close(owner.session)
            self.reusable = None
        elif not self.reap and not live:
            self.client.session_close(owner.session)  # disarms too
        elif not self.reap:
            # Left open, its leftovers running, until the run ends;
            # nothing more may join it.
            self.left_open.append(owner.session)
            if was_armed:
                self.client.disarm()
            if reuse:
                self.reusable = None
        if was_armed and self.reusable != owner.session:
            self.armed = None
        left = [o for o in outcomes if o.get("result") in _LEFT]
        allowed = [o for o in left if o.get("result") == "kept" or _allowed(owner.allow, o.get("argv") or [])]
        return [o for o in left if o not in allowed], allowed

    # The test's window.

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        if self.active:
            mark = item.get_closest_marker("lineage")
            allow = mark.kwargs.get("allow") if mark is not None else None
            owner = _Owner(self.reusable or self.next_session("t"), item.nodeid, allow)
            self.reusable = None
            self.stack = [owner]
            self.item = item
            self.arm(owner)
        yield
        self.item = None
        self.stack = []

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """After the test's fixtures are finalized: its leftovers."""
        if not self.active or not self.stack or self.item is not item:
            return
        owner = self.stack[0]
        try:
            leaks, allowed = self.end(owner, reuse=True)
        except LineageError as e:
            self.problem = "the daemon failed at teardown (%s)" % e
            self.say_once()
            return
        for o in leaks:
            item.user_properties.append((_LEAK, _describe(o, self.reap)))
        for o in allowed:
            item.user_properties.append((_ALLOWED, _describe(o, self.reap)))
        if self.fail:
            mine = [v for k, v in item.user_properties if k in (_LEAK, _FIXTURE_LEAK)]
            if mine:
                pytest.fail("lineage: left behind:\n  " + "\n  ".join(mine), pytrace=False)

    # Fixtures of a wider scope than the function own their processes.

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Iterator[None]:
        if not self.active or fixturedef.scope == "function" or not self.stack:
            yield
            return
        owner = _Owner(self.next_session("f"), "fixture %s (%s scope, %s)" % (
            fixturedef.argname, fixturedef.scope, fixturedef.baseid or "conftest"))
        self.fixtures[id(fixturedef)] = owner
        self.stack.append(owner)
        self.arm(owner)
        try:
            yield
        finally:
            self.stack.remove(owner)
            self.arm(self.stack[-1] if self.stack else None)
            # Finalizers run last in, first out: this one, added after the
            # fixture's own teardown, runs before it, armed for the fixture.
            fixturedef.addfinalizer(lambda: self.arm(owner))

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: Any) -> None:
        owner = self.fixtures.pop(id(fixturedef), None)
        if owner is None or not self.active:
            return
        self.arm(self.stack[-1] if self.stack else None)
        try:
            leaks, allowed = self.end(owner)
        except LineageError as e:
            self.problem = "the daemon failed at a fixture's teardown (%s)" % e
            self.say_once()
            return
        item = self.item
        if item is None:
            return
        for o in leaks:
            item.user_properties.append((_FIXTURE_LEAK, "%s: %s" % (owner.label, _describe(o, self.reap))))
        for o in allowed:
            item.user_properties.append((_ALLOWED, "%s: %s" % (owner.label, _describe(o, self.reap))))

    # The report, from the teardown reports (those of xdist's workers too).

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for key, value in report.user_properties:
            if key in _KEYS:
                self.leaks.append((report.nodeid, key, str(value)))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.say_once()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.problem is not None or self.controller:
            return
        try:
            if self.reusable is not None:
                self.client.session_close(self.reusable)  # disarms too
                self.armed = self.reusable = None
            self.arm(None)
            # Without --lineage-reap nothing is signalled: the leftovers
            # run on, untracked.
            for s in self.left_open:
                self.client.report(s)  # claims any root not yet the session's
                for root in self.client.session(s).get("roots") or []:
                    self.client.untrack(root["root"])
                self.client.session_close(s)
        except LineageError as e:
            self.problem = "the daemon failed at the end (%s)" % e
        self.client.close()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.say_once()
        if self.problem is not None and not self.leaks:
            return
        if not self.leaks:
            terminalreporter.write_sep("-", "lineage: no test left a process behind")
            return
        terminalreporter.write_sep("=", _summary_title(self.leaks))
        by_test: dict[str, list[tuple[str, str]]] = {}
        for nodeid, key, value in self.leaks:
            by_test.setdefault(nodeid, []).append((key, value))
        for nodeid, entries in by_test.items():
            terminalreporter.write_line(nodeid)
            for key, value in entries:
                tag = {"lineage_leak": "leak", "lineage_fixture_leak": "fixture leak", "lineage_allowed": "allowed"}[key]
                terminalreporter.write_line("  %-12s %s" % (tag, value))


def _summary_title(leaks: list[tuple[str, str, str]]) -> str:
    """The terminal summary's title: the tests and fixtures that leaked,
    counted apart from the processes an allow spared."""
    tests = {n for n, k, _ in leaks if k == _LEAK}
    fixtures = {v.split(": ", 1)[0] for _, k, v in leaks if k == _FIXTURE_LEAK}
    allowed = sum(1 for _, k, _ in leaks if k == _ALLOWED)
    leakers = " and ".join(_count(n, what) for n, what in ((len(tests), "test"), (len(fixtures), "fixture")) if n)
    allowed_text = _count(allowed, "allowed process", "allowed processes")
    if not leakers:
        return "lineage: no test left a process behind; %s outlived %s test" % (
            allowed_text, "its" if allowed == 1 else "their")
    if allowed:
        return "lineage: %s left processes behind; %s outlived %s test too" % (
            leakers, allowed_text, "its" if allowed == 1 else "their")
    return "lineage: %s left processes behind" % leakers


def _count(n: int, one: str, many: str = "") -> str:
    return "%d %s" % (n, one if n == 1 else many or one + "s")


__all__ = ["LineagePlugin", "pytest_addoption", "pytest_configure"]
