"""The client of the lineage sidecar: the API over its Unix socket."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket as _socket
import threading
import time
import urllib.parse
from typing import Any, Iterator, Mapping, Sequence

__all__ = ["Client", "Ended", "LineageError", "DEFAULT_SOCKET"]

DEFAULT_SOCKET = "/run/lineage/lineage.sock"

# How long a connect waits for room in the daemon's full backlog.
_BUSY_WAIT = 5.0


class LineageError(Exception):
    """An error answered by the daemon, or the daemon out of reach.

    ``code`` is the API's error code, ``message`` its words, ``status`` the
    HTTP status (0 when no answer came).
    """

    def __init__(self, code: str, message: str, status: int = 0) -> None:
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.status = status


class Ended(dict):  # type: ignore[type-arg]
    """The answer of a turn end or a session close, as the API gives it
    (``session``, ``event``, ``kind``, ``reaping``, ``roots``,
    ``children``), with every outcome at hand in ``outcomes``."""

    @property
    def outcomes(self) -> list[dict[str, Any]]:
        """Every member's outcome, of every root, child sessions' included."""
        out: list[dict[str, Any]] = []
        for root in self.get("roots") or []:
            out.extend(root.get("outcomes") or [])
        for child in self.get("children") or []:
            out.extend(Ended(child).outcomes)
        return out


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("lineage", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        # A Unix socket whose backlog of connections not yet accepted is
        # full refuses a connect with a timeout at once (EAGAIN) where a
        # blocking one waits for room: a flood of another user's
        # connections fills it for an instant. So a full backlog is tried
        # again, for up to _BUSY_WAIT (and the timeout, if shorter), as the
        # Go client does.
        wait = 0.001
        deadline = time.monotonic() + min(_BUSY_WAIT, self.timeout if self.timeout is not None else _BUSY_WAIT)
        while True:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            if self.timeout is not None:
                sock.settimeout(self.timeout)
            try:
                sock.connect(self._path)
            except BlockingIOError:
                sock.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(wait)
                wait = min(2 * wait, 0.05)
                continue
            except OSError:
                sock.close()
                raise
            self.sock = sock
            return


def identity_string(identity: Any) -> str:
    """``PID@START`` from a string, an API identity dict or a (pid, start)."""
    if isinstance(identity, Mapping):
        return "%d@%d" % (identity["pid"], identity["start"])
    if isinstance(identity, (tuple, list)):
        return "%d@%d" % tuple(identity)
    return str(identity)


def _duration(ttl: Any) -> str | None:
    """A Go duration string from seconds (int, float), a timedelta or a
    string such as "30m"."""
    if ttl is None or isinstance(ttl, str):
        return ttl
    if hasattr(ttl, "total_seconds"):
        ttl = ttl.total_seconds()
    return "%gs" % ttl


def _abs_socket(socket: str) -> str:
    """socket made absolute against the working directory, unless abstract
    (or there is no working directory to read)."""
    if socket.startswith("\0"):
        return socket
    try:
        return os.path.abspath(socket)
    except OSError:
        return socket


def _unreachable(socket: str, e: BaseException) -> LineageError:
    """The error of a request no daemon answered: code ``unavailable``,
    saying whether this uid may not use the socket or no daemon answers."""
    if isinstance(e, PermissionError):
        return LineageError("unavailable", "uid %d may not use the socket %s (its mode and group decide who may: "
                            "lineage serve --socket-mode, --socket-group): %s" % (os.getuid(), socket, e))
    return LineageError("unavailable", "no daemon answers at %s: %s" % (socket, e))


def _error_of(status: int, raw: bytes) -> LineageError:
    try:
        err = json.loads(raw)
        return LineageError(err["code"], err["error"], status)
    except (ValueError, KeyError, TypeError):
        return LineageError("internal", raw.decode(errors="replace").strip(), status)


class Client:
    """A client of one daemon, safe to share between threads.

    ``socket`` is the daemon's socket: by default ``$LINEAGE_SOCKET``, else
    ``/run/lineage/lineage.sock``. A relative path is made absolute here,
    once, against the working directory of this moment, so that the calls
    and the commands ``run`` starts (``lineage exec --socket``, each in its
    own ``cwd``) reach the same daemon; a name in Linux's abstract namespace
    (a leading NUL) is kept as it is. ``lineage`` is the lineage binary that
    ``run`` and ``popen`` start commands through: by default
    ``$LINEAGE_BIN``, else ``lineage`` on ``PATH``. ``timeout`` bounds each
    call in seconds (None: no bound; a reap takes up to the daemon's linger
    and grace). ``keepalive`` keeps one connection per thread open between
    calls, saving a connect each (the pytest plugin's calls do).
    """

    def __init__(self, socket: str | None = None, lineage: str | None = None,
                 timeout: float | None = None, keepalive: bool = False) -> None:
        self.socket = _abs_socket(socket or os.environ.get("LINEAGE_SOCKET") or DEFAULT_SOCKET)
        self.lineage = lineage or os.environ.get("LINEAGE_BIN") or "lineage"
        self.timeout = timeout
        self.keepalive = keepalive
        self._local = threading.local()
        self._known_sessions: set[str] = set()
        self._lineage_path: str | None = None

    # The transport.

    def _request(self, conn: _UnixConnection, method: str, path: str, body: Any) -> http.client.HTTPResponse:
        data = None
        headers = {}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        return conn.getresponse()

    def _open(self, method: str, path: str, body: Any = None,
              timeout: float | None = None) -> tuple[_UnixConnection, http.client.HTTPResponse]:
        conn = _UnixConnection(self.socket, timeout)
        try:
            resp = self._request(conn, method, path, body)
        except OSError as e:
            conn.close()
            raise _unreachable(self.socket, e) from e
        if resp.status >= 300:
            raw = resp.read()
            conn.close()
            raise _error_of(resp.status, raw)
        return conn, resp

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        if self.keepalive:
            return self._call_kept(method, path, body)
        conn, resp = self._open(method, path, body, self.timeout)
        try:
            raw = resp.read()
        finally:
            conn.close()
        return json.loads(raw) if raw else None

    def _call_kept(self, method: str, path: str, body: Any) -> Any:
        """A call on this thread's open connection, opened again once when
        the daemon closed it meanwhile (it closes idle ones)."""
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = _UnixConnection(self.socket, self.timeout)
            try:
                resp = self._request(conn, method, path, body)
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self._local.conn = None
                if attempt == 0 and not isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
                    continue
                raise _unreachable(self.socket, e) from e
            if resp.status >= 300:
                raise _error_of(resp.status, raw)
            return json.loads(raw) if raw else None
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Closes this thread's kept connection, if any."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @staticmethod
    def _session_path(session: str, tail: str = "") -> str:
        """The path of session's endpoint tail, the id one escaped segment
        (its dots too when it is dots alone: the daemon would clean "." and
        ".." away, to another endpoint). An empty id raises ValueError."""
        seg = urllib.parse.quote(str(session), safe="")
        if not seg:
            raise ValueError("no session id given")
        if not seg.strip("."):
            seg = seg.replace(".", "%2E")
        return "/v1/sessions/" + seg + tail

    # The API.

    def status(self) -> dict[str, Any]:
        """The daemon's status: ``api``, ``reaping``, ``sessions``,
        ``caller_uid``, ``backend``."""
        return self._call("GET", "/v1/status")  # type: ignore[no-any-return]

    def open_session(self, session: str | None = None, kind: str | None = None, label: str | None = None,
                     parent: str | None = None, owner: Any = None, keep: Any = None,
                     self_close: bool = False) -> dict[str, Any]:
        """Opens a session (the daemon names it when ``session`` is None)
        and returns it. ``kind`` is "interactive" or "autonomous";
        ``owner``, an identity, closes the session when that process ends;
        ``keep``, keep rules (``PID@START``, ``root:PID@START``,
        ``exe:PATH``), spare processes from every reap of the session;
        ``self_close`` lets a member of the session close it."""
        body: dict[str, Any] = {}
        for key, value in (("id", session), ("kind", kind), ("label", label), ("parent", parent)):
            if value is not None:
                body[key] = value
        if owner is not None:
            pid, start = identity_string(owner).split("@")
            body["owner"] = {"pid": int(pid), "start": int(start)}
        if keep is not None:
            if isinstance(keep, str):
                raise TypeError("keep is a list of rules, not one string")
            body["keep"] = [str(k) for k in keep]
        if self_close:
            body["self_close"] = True
        return self._call("POST", "/v1/sessions", body)  # type: ignore[no-any-return]

    def session(self, session: str) -> dict[str, Any]:
        """The session as the API shows it, with its roots and keeps."""
        return self._call("GET", self._session_path(session))  # type: ignore[no-any-return]

    def run(self, args: Any, session: str, kind: str | None = None, label: str | None = None,
            **kwargs: Any) -> Any:
        """``subprocess.run(args, **kwargs)`` with the command a root of
        ``session`` from its first instruction; see ``lineage_client.run``."""
        from ._run import run
        return run(self, args, session, kind=kind, label=label, **kwargs)

    def popen(self, args: Any, session: str, kind: str | None = None, label: str | None = None,
              **kwargs: Any) -> Any:
        """A ``subprocess.Popen``-like handle on the command, a root of
        ``session``; see ``lineage_client.Popen``."""
        from ._run import Popen
        return Popen(self, args, session, kind=kind, label=label, **kwargs)

    def lineage_path(self) -> str:
        """The lineage binary's path, looked up once."""
        if self._lineage_path is None:
            path = shutil.which(self.lineage)
            if path is None:
                raise LineageError("unavailable", "no lineage binary %r (give lineage= or set LINEAGE_BIN)" % self.lineage)
            self._lineage_path = path
        return self._lineage_path

    def ensure_session(self, session: str, kind: str | None = None, label: str | None = None) -> None:
        """Opens ``session`` unless it exists; a bad session, another
        uid's (``conflict``: its roots are its opener's, so nothing would
        run), or one of another ``kind`` (``conflict``), raises
        ``LineageError``. Once seen, a session is not asked
        about again by this client: if it closes, ``lineage exec`` opens it
        anew."""
        if session in self._known_sessions:
            return
        try:
            s = self._own_session(session)
            if kind and s.get("kind") != kind:
                # A turn end would do otherwise than the caller expects.
                raise LineageError("conflict", "session %r is %s, not %s: a session's kind is set when it opens"
                                   % (session, s.get("kind"), kind), 409)
        except LineageError as e:
            if e.code != "not_found":
                raise
            try:
                self.open_session(session, kind=kind, label=label)
            except LineageError as e2:
                if e2.code != "conflict":
                    raise
                # Opened meanwhile: by another caller of ours, fine; by
                # another uid (which we can't see), refused.
                try:
                    self._own_session(session)
                except LineageError as e3:
                    if e3.code != "not_found":
                        raise
                    raise e2 from None
        self._known_sessions.add(session)

    def _own_session(self, session: str) -> dict[str, Any]:
        s = self.session(session)
        if s.get("uid") != os.geteuid():
            raise LineageError("conflict", "session %r was opened by uid %s: its roots are its opener's, so nothing runs "
                               "(as root, lineage exec --join joins it)" % (session, s.get("uid")), 409)
        return s

    def turn_end(self, session: str) -> Ended:
        """Ends a turn of ``session``: the policy reaps (autonomous) or
        reports (interactive) what its roots left. Returns the ``Ended``."""
        return Ended(self._call("POST", self._session_path(session, "/turn-end")))

    def session_close(self, session: str) -> Ended:
        """Closes ``session`` (child sessions first): what is left is
        reaped as a session close calls for. Returns the ``Ended``."""
        self._known_sessions.discard(session)
        return Ended(self._call("POST", self._session_path(session, "/close")))

    def report(self, session: str) -> Ended:
        """The session's live processes, each ``reported``; nothing is touched."""
        return Ended(self._call("GET", self._session_path(session, "/report")))

    def keep(self, identity: Any, ttl: Any = None, root: bool = False) -> dict[str, Any]:
        """Spares a process (``root=True``: a root's whole lineage) from its
        session's reaps, for ``ttl`` (seconds, a timedelta or "30m"; None:
        until the session closes). ``identity`` is "PID@START", an API
        identity or a (pid, start) pair. Returns the keep rule."""
        body: dict[str, Any] = {"process": identity_string(identity)}
        if root:
            body["root"] = True
        if ttl is not None:
            body["ttl"] = _duration(ttl)
        return self._call("POST", "/v1/keeps", body)  # type: ignore[no-any-return]

    def untrack(self, root: Any) -> dict[str, Any]:
        """Stops tracking a root's lineage (nothing is signalled)."""
        return self._call("DELETE", "/v1/roots/" + identity_string(root))  # type: ignore[no-any-return]

    def end_root(self, root: Any, event: str = "deadline", **fields: Any) -> dict[str, Any]:
        """Ends one root's lineage as ``event`` (``deadline``: reaped,
        whatever the session's kind, sparing its keeps) and forgets the
        root; the session's other roots are untouched."""
        body = dict(fields, event=event)
        return self._call("POST", "/v1/roots/" + identity_string(root) + "/end", body)  # type: ignore[no-any-return]

    def holders(self, root: Any, pipes: Sequence[int]) -> dict[str, Any]:
        """The live members of ``root``'s lineage that hold any of
        ``pipes`` (inodes, as ``os.fstat`` gives them)."""
        query = urllib.parse.urlencode({"pipe": ",".join(str(p) for p in pipes)})
        return self._call("GET", "/v1/roots/" + identity_string(root) + "/holders?" + query)  # type: ignore[no-any-return]

    def arm(self, session: str, kind: str | None = None, label: str | None = None) -> dict[str, Any]:
        """Arms this process for ``session`` (opened with ``kind`` and
        ``label`` when it doesn't exist): from now on, every process it
        forks, from any thread, is a new root of that session before its
        first instruction, until it is armed for another or disarmed."""
        body: dict[str, Any] = {"session": session}
        if kind is not None:
            body["kind"] = kind
        if label is not None:
            body["label"] = label
        return self._call("POST", "/v1/arms", body)  # type: ignore[no-any-return]

    def disarm(self) -> None:
        """Disarms this process: what it forks is no longer a root."""
        self._call("DELETE", "/v1/arms")

    def events(self, session: str | None = None, timeout: float | None = None) -> "_EventStream":
        """Streams events (dicts of the record schema, docs/record.md): the
        header first, then fork, exec, exit, signal, keep, leak and loss
        events as they happen. With ``session``, the stream ends when the
        session closes, its last event being of kind ``end``; without,
        every session's events (uid 0 only), until closed. The stream is
        open once this returns; close the iterator to end it sooner.
        ``timeout`` bounds each wait for a line."""
        path = "/v1/events"
        if session is not None:
            path += "?" + urllib.parse.urlencode({"session": session})
        conn, resp = self._open("GET", path, timeout=timeout)
        return _EventStream(conn, resp)


class _EventStream:
    """An iterator over an NDJSON stream; closing it ends the stream."""

    def __init__(self, conn: _UnixConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        line = self._resp.readline()
        if not line:
            self.close()
            raise StopIteration
        return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._resp.close()
        self._conn.close()

    def __enter__(self) -> "_EventStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
