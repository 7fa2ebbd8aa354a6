"""A client for the lineage sidecar (``lineage serve``), standard library only.

It speaks the daemon's HTTP/JSON API (docs/api.md) over its Unix socket with
``http.client``, one connection per call, so a ``Client`` may be shared by
threads. The daemon authorises by the caller's uid (``SO_PEERCRED``): what
this process may register, see, keep or close is what its uid may.

    from lineage_client import Client

    c = Client()                                   # $LINEAGE_SOCKET, else /run/lineage/lineage.sock
    c.run(["make", "test"], session="turn-7", kind="autonomous", check=True)
    ended = c.turn_end("turn-7")                   # autonomous: reap what make left
    for o in ended.outcomes:
        print(o["process"], o["argv"], o["result"])
    c.session_close("turn-7")

Every error the API answers raises ``LineageError`` with its ``code``
(``invalid``, ``forbidden``, ``not_found``, ``conflict``, ...) and message;
a daemon that can't be reached raises it with code ``unavailable``.
"""

import http.client
import json
import os
import shutil
import socket
import subprocess
import urllib.parse

__all__ = ["Client", "Ended", "LineageError", "DEFAULT_SOCKET"]

DEFAULT_SOCKET = "/run/lineage/lineage.sock"


class LineageError(Exception):
    """An error answered by the daemon, or the daemon out of reach.

    ``code`` is the API's error code, ``message`` its words, ``status`` the
    HTTP status (0 when no answer came).
    """

    def __init__(self, code, message, status=0):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.status = status


class Ended(dict):
    """The answer of a turn end or a session close, as the API gives it
    (``session``, ``event``, ``kind``, ``reaping``, ``roots``,
    ``children``), with every outcome at hand in ``outcomes``."""

    @property
    def outcomes(self):
        """Every member's outcome, of every root, child sessions' included."""
        out = []
        for root in self.get("roots") or []:
            out.extend(root.get("outcomes") or [])
        for child in self.get("children") or []:
            out.extend(Ended(child).outcomes)
        return out


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("lineage", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _identity(identity):
    """``PID@START`` from a string, an API identity dict or a (pid, start)."""
    if isinstance(identity, dict):
        return "%d@%d" % (identity["pid"], identity["start"])
    if isinstance(identity, (tuple, list)):
        return "%d@%d" % tuple(identity)
    return str(identity)


def _duration(ttl):
    """A Go duration string from seconds (int, float), a timedelta or a
    string such as "30m"."""
    if ttl is None or isinstance(ttl, str):
        return ttl
    if hasattr(ttl, "total_seconds"):
        ttl = ttl.total_seconds()
    return "%gs" % ttl


class Client:
    """A client of one daemon.

    ``socket`` is the daemon's socket: by default ``$LINEAGE_SOCKET``, else
    ``/run/lineage/lineage.sock``. ``lineage`` is the lineage binary that
    ``run`` starts commands through: by default ``$LINEAGE_BIN``, else
    ``lineage`` on ``PATH``. ``timeout`` bounds each call in seconds (None:
    no bound; a reap takes up to the daemon's linger and grace).
    """

    def __init__(self, socket=None, lineage=None, timeout=None):
        self.socket = socket or os.environ.get("LINEAGE_SOCKET") or DEFAULT_SOCKET
        self.lineage = lineage or os.environ.get("LINEAGE_BIN") or "lineage"
        self.timeout = timeout

    # The transport.

    def _open(self, method, path, body=None, timeout=None):
        conn = _UnixConnection(self.socket, timeout)
        data = None
        headers = {}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            raise LineageError("unavailable", "no daemon answers at %s: %s" % (self.socket, e)) from e
        if resp.status >= 300:
            raw = resp.read()
            conn.close()
            try:
                err = json.loads(raw)
                code, message = err["code"], err["error"]
            except (ValueError, KeyError, TypeError):
                code, message = "internal", raw.decode(errors="replace").strip()
            raise LineageError(code, message, resp.status)
        return conn, resp

    def _call(self, method, path, body=None):
        conn, resp = self._open(method, path, body, self.timeout)
        try:
            raw = resp.read()
        finally:
            conn.close()
        return json.loads(raw) if raw else None

    @staticmethod
    def _session_path(session, tail=""):
        return "/v1/sessions/" + urllib.parse.quote(str(session), safe="") + tail

    # The API.

    def status(self):
        """The daemon's status: ``api``, ``reaping``, ``sessions``, ``caller_uid``."""
        return self._call("GET", "/v1/status")

    def open_session(self, session=None, kind=None, label=None, parent=None, owner=None):
        """Opens a session (the daemon names it when ``session`` is None)
        and returns it. ``kind`` is "interactive" or "autonomous";
        ``owner``, an identity, closes the session when that process ends."""
        body = {}
        for key, value in (("id", session), ("kind", kind), ("label", label), ("parent", parent)):
            if value is not None:
                body[key] = value
        if owner is not None:
            pid, start = _identity(owner).split("@")
            body["owner"] = {"pid": int(pid), "start": int(start)}
        return self._call("POST", "/v1/sessions", body)

    def session(self, session):
        """The session as the API shows it, with its roots and keeps."""
        return self._call("GET", self._session_path(session))

    def run(self, args, session, kind=None, label=None, **kwargs):
        """``subprocess.run(args, **kwargs)``, with the command started
        through ``lineage exec``: it is a root of ``session`` (opened with
        ``kind`` when it doesn't exist) before its first instruction, and
        whatever it leaves behind is the session's to reap. Returns the
        ``subprocess.CompletedProcess`` (its ``args`` are the ones given).

        The session is checked first: a bad or foreign session raises
        ``LineageError`` and nothing runs. ``shell=True`` runs ``args`` with
        /bin/sh -c."""
        if isinstance(args, (str, bytes)):
            args = ["/bin/sh", "-c", args] if kwargs.pop("shell", False) else [args]
        else:
            if kwargs.pop("shell", False):
                raise ValueError("shell=True takes a string command")
            args = list(args)
        if not args:
            raise ValueError("run: no command given")
        self._ensure_session(session, kind, label)
        lineage = shutil.which(self.lineage)
        if lineage is None:
            raise LineageError("unavailable", "no lineage binary %r (give lineage= or set LINEAGE_BIN)" % self.lineage)
        argv = [lineage, "exec", "--socket", self.socket, "--session", str(session)]
        if kind is not None:
            argv += ["--kind", kind]
        if label is not None:
            argv += ["--label", label]
        argv += ["--"] + [os.fsdecode(a) for a in args]
        check = kwargs.pop("check", False)
        done = subprocess.run(argv, **kwargs)
        out = subprocess.CompletedProcess(args, done.returncode, done.stdout, done.stderr)
        if check:
            out.check_returncode()
        return out

    def _ensure_session(self, session, kind, label):
        try:
            self.session(session)
            return
        except LineageError as e:
            if e.code != "not_found":
                raise
        try:
            self.open_session(session, kind=kind, label=label)
        except LineageError as e:
            # Opened meanwhile by another caller of ours: fine.
            if e.code != "conflict":
                raise

    def turn_end(self, session):
        """Ends a turn of ``session``: the policy reaps (autonomous) or
        reports (interactive) what its roots left. Returns the ``Ended``."""
        return Ended(self._call("POST", self._session_path(session, "/turn-end")))

    def session_close(self, session):
        """Closes ``session`` (child sessions first): what is left is
        reaped as a session close calls for. Returns the ``Ended``."""
        return Ended(self._call("POST", self._session_path(session, "/close")))

    def keep(self, identity, ttl=None, root=False):
        """Spares a process (``root=True``: a root's whole lineage) from its
        session's reaps, for ``ttl`` (seconds, a timedelta or "30m"; None:
        until the session closes). ``identity`` is "PID@START", an API
        identity or a (pid, start) pair. Returns the keep rule."""
        body = {"process": _identity(identity)}
        if root:
            body["root"] = True
        if ttl is not None:
            body["ttl"] = _duration(ttl)
        return self._call("POST", "/v1/keeps", body)

    def events(self, session=None, timeout=None):
        """Streams events (dicts of the record schema, docs/record.md): the
        header first, then fork, exec, exit, signal, keep, leak and loss
        events as they happen. The stream is open once this returns; close
        the iterator to end it. Without ``session``, every session's
        events (uid 0 only). ``timeout`` bounds each wait for a line."""
        path = "/v1/events"
        if session is not None:
            path += "?" + urllib.parse.urlencode({"session": session})
        conn, resp = self._open("GET", path, timeout=timeout)
        return _EventStream(conn, resp)


class _EventStream:
    """An iterator over an NDJSON stream; closing it ends the stream."""

    def __init__(self, conn, resp):
        self._conn = conn
        self._resp = resp

    def __iter__(self):
        return self

    def __next__(self):
        line = self._resp.readline()
        if not line:
            self.close()
            raise StopIteration
        return json.loads(line)

    def close(self):
        self._resp.close()
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
