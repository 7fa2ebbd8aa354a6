"""Commands run as roots of a session that never wait on their leftovers.

A command starts through ``lineage exec``, which registers its own process
with the daemon and then execve's the command: same pid, same start time,
so the command is a root from its first instruction. Its output pipes are
read until end of file, or, once the command itself has exited, until the
hold delay has passed: what was written until then is kept, and the
members of its lineage that still hold a pipe (a ``cmd &`` that inherited
stdout) are named as holders and left to the session's policy.
"""

from __future__ import annotations

import dataclasses
import io
import locale
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from subprocess import DEVNULL, PIPE, STDOUT, CalledProcessError, CompletedProcess, TimeoutExpired
from typing import IO, Any, Sequence

from ._client import Client, LineageError

__all__ = ["DEFAULT_HOLD_DELAY", "Completed", "Holder", "Popen", "run", "PIPE", "STDOUT", "DEVNULL"]

DEFAULT_HOLD_DELAY = 0.1
"""Seconds a command's output pipes are read after the command exits."""

_CHUNK = 32 << 10


@dataclasses.dataclass
class Holder:
    """A member of the command's lineage that held one of its pipes when
    the hold delay ran out: its identity (``pid``, ``start``), ``argv``,
    ``comm``, ``age`` in seconds, and the ``streams`` it held ("stdout",
    "stderr")."""

    pid: int
    start: int
    argv: list[str]
    comm: str
    age: float
    streams: list[str]

    @property
    def identity(self) -> str:
        """``PID@START``, as the API names the process."""
        return "%d@%d" % (self.pid, self.start)


class Completed(CompletedProcess):  # type: ignore[type-arg]
    """``subprocess.CompletedProcess`` with ``holders`` (the members that
    held the command's pipes when ``run`` returned) and ``root`` (the
    command's identity, ``PID@START``)."""

    def __init__(self, args: Any, returncode: int, stdout: Any = None, stderr: Any = None,
                 holders: list[Holder] | None = None, root: str | None = None) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.holders: list[Holder] = holders or []
        self.root = root


def _start_ticks(pid: int) -> int:
    """Field 22 of /proc/PID/stat: the kernel's start time of pid."""
    with open("/proc/%d/stat" % pid, "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def _command(args: Any, shell: bool) -> list[str]:
    """The argv to run, with subprocess's meaning of a string and of shell."""
    if isinstance(args, (str, bytes, os.PathLike)):
        argv = [args]
    else:
        argv = list(args)
    if shell:
        argv = ["/bin/sh", "-c"] + argv
    if not argv:
        raise ValueError("run: no command given")
    return [os.fsdecode(a) for a in argv]


class _Pipe:
    """One output pipe of the command, its read end non-blocking."""

    def __init__(self, popen: "Popen", fd: int, streams: list[str]) -> None:
        self.popen = popen
        self.fd = fd
        self.streams = streams
        self.inode = os.fstat(fd).st_ino
        # done: end of file, or given up on at the hold delay's end.
        self.done = False
        self.held = False
        # touched: read through the streaming handle.
        self.touched = False

    def read_some(self, buf: bytearray | memoryview) -> int | None:
        """Reads what is there into buf: the count, 0 at end of file, None
        when nothing is there now."""
        try:
            n = os.readv(self.fd, [buf])
        except BlockingIOError:
            return None
        if n == 0:
            self.done = True
        return n

    def readinto(self, buf: bytearray | memoryview) -> int:
        """A streaming read: waits for data, end of file, or the hold
        delay's end after the command exits (then 0, as at end of file)."""
        self.touched = True
        p = self.popen
        while not self.done:
            n = self.read_some(buf)
            if n is not None:
                return n
            deadline = p._hold_deadline()
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                p._give_up([self])
                break
            fds = [self.fd]
            if p._exited_at is None:
                fds.append(p._pidfd)
            ready, _, _ = select.select(fds, [], [], None if deadline is None else deadline - now)
            if p._pidfd in ready:
                p._note_exit()
        return 0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.done = True


class _PipeReader(io.RawIOBase):
    """The raw stream of one pipe, for Popen.stdout and Popen.stderr."""

    def __init__(self, pipe: _Pipe) -> None:
        super().__init__()
        self._pipe = pipe

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._pipe.fd

    def readinto(self, buf: Any) -> int:
        return self._pipe.readinto(memoryview(buf).cast("B"))

    def close(self) -> None:
        if not self.closed:
            self._pipe.close()
        super().close()


class Popen:
    """A ``subprocess.Popen``-like handle on a command run as a root of
    ``session`` (opened with ``kind`` if it doesn't exist; ``label`` is the
    root's), through the client's ``lineage exec``. An empty ``session``
    raises ValueError, and nothing is asked or run.

    ``stdin``, ``stdout``, ``stderr``, ``text`` (``universal_newlines``),
    ``encoding``, ``errors``, ``bufsize``, ``shell``, ``cwd``, ``env`` and
    the rest of ``subprocess.Popen``'s keywords have their meaning, except
    ``executable`` and ``preexec_fn``, refused (lineage exec runs the
    command by its name, and a preexec_fn runs before the registration).
    Reading ``stdout`` or ``stderr`` to the end ends within ``hold_delay``
    seconds (``DEFAULT_HOLD_DELAY``) of the command's exit, even while its
    leftovers hold the pipe, with all that was written until then; those
    holders are then in ``holders``. ``root`` is the command's identity.
    ``kill``, ``terminate`` and ``send_signal`` signal the command's own
    process, as subprocess's do; ``end_lineage`` ends its whole lineage
    through the daemon.
    """

    def __init__(self, client: Client, args: Any, session: str, kind: str | None = None,
                 label: str | None = None, *, hold_delay: float | None = None, stdin: Any = None,
                 stdout: Any = None, stderr: Any = None, text: bool | None = None,
                 universal_newlines: bool | None = None, encoding: str | None = None,
                 errors: str | None = None, bufsize: int = -1, shell: bool = False, **kwargs: Any) -> None:
        for refused in ("executable", "preexec_fn"):
            if kwargs.get(refused) is not None:
                raise TypeError("%s is not supported: lineage exec runs the command by its name, "
                                "registered before it runs" % refused)
            kwargs.pop(refused, None)
        self.args = args
        self.client = client
        self.hold_delay = DEFAULT_HOLD_DELAY if hold_delay is None else hold_delay
        self.holders: list[Holder] = []
        self.returncode: int | None = None
        self.root: str | None = None
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        self.text_mode = bool(text or universal_newlines or encoding or errors)
        self._encoding = encoding or locale.getpreferredencoding(False)
        self._errors = errors or "strict"
        self._exited_at: float | None = None
        self._ended = False
        self._lock = threading.Lock()
        self._pipes: list[_Pipe] = []
        self._comm: dict[str, Any] | None = None
        command = _command(args, shell)
        if not session:
            # Asked for, the daemon would open a session of its naming.
            raise ValueError("run: no session given")
        client.ensure_session(session, kind=kind, label=None)
        argv = [client.lineage_path(), "exec", "--socket", client.socket, "--session", str(session)]
        if kind is not None:
            argv += ["--kind", kind]
        if label is not None:
            argv += ["--label", label]
        argv += ["--"] + command
        self._start(argv, stdin, stdout, stderr, bufsize, kwargs)

    def _start(self, argv: list[str], stdin: Any, stdout: Any, stderr: Any, bufsize: int,
               kwargs: dict[str, Any]) -> None:
        child: list[int] = []  # the child's ends, closed here once it runs
        mine: list[int] = []  # our ends, owned by the pipes once it runs
        stdin_writer = -1
        try:
            if stdin == PIPE:
                r, stdin_writer = os.pipe2(os.O_CLOEXEC)
                child.append(r)
                mine.append(stdin_writer)
                stdin = r
            out_pipe = None
            if stdout == PIPE:
                r, w = os.pipe2(os.O_CLOEXEC)
                child.append(w)
                mine.append(r)
                out_pipe = self._pipe(r, "stdout")
                stdout = w
            if stderr == STDOUT and out_pipe is not None:
                out_pipe.streams.append("stderr")
                stderr = stdout
            elif stderr == PIPE:
                r, w = os.pipe2(os.O_CLOEXEC)
                child.append(w)
                mine.append(r)
                self._pipe(r, "stderr")
                stderr = w
            self._proc = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, **kwargs)
        except BaseException:
            for fd in mine:
                os.close(fd)
            raise
        finally:
            for fd in child:
                os.close(fd)
        if stdin_writer >= 0:
            self.stdin = self._writer(stdin_writer, bufsize)
        self.pid = self._proc.pid
        # Not waited for yet, so the pid is still the command's.
        self.root = "%d@%d" % (self.pid, _start_ticks(self.pid))
        self._pidfd = os.pidfd_open(self.pid)
        for p in self._pipes:
            reader = io.BufferedReader(_PipeReader(p), buffer_size=_CHUNK)
            stream: IO[Any] = reader
            if self.text_mode:
                stream = io.TextIOWrapper(reader, encoding=self._encoding, errors=self._errors)
            if p.streams[0] == "stdout":
                self.stdout = stream
            else:
                self.stderr = stream

    def _writer(self, fd: int, bufsize: int) -> IO[Any]:
        f: IO[Any] = open(fd, "wb", buffering=bufsize)
        if self.text_mode:
            f = io.TextIOWrapper(f, encoding=self._encoding, errors=self._errors,  # type: ignore[arg-type]
                                 write_through=True, line_buffering=bufsize == 1)
        return f

    def _pipe(self, fd: int, stream: str) -> _Pipe:
        os.set_blocking(fd, False)
        p = _Pipe(self, fd, [stream])
        self._pipes.append(p)
        return p

    # Exit and the hold delay.

    def _note_exit(self) -> None:
        with self._lock:
            if self._exited_at is None:
                self._exited_at = time.monotonic()

    def _hold_deadline(self) -> float | None:
        """When reading the pipes stops: the command's exit plus the hold
        delay; None while it runs (as far as has been seen)."""
        if self._exited_at is None:
            if not select.select([self._pidfd], [], [], 0)[0]:
                return None
            self._note_exit()
        assert self._exited_at is not None
        return self._exited_at + self.hold_delay

    def _give_up(self, pipes: Sequence[_Pipe]) -> None:
        """The hold delay is over for pipes: take what they hold now, then
        name who holds them."""
        held = [p for p in pipes if not p.done]
        for p in held:
            p.done = p.held = True
        if not held or self._ended or self.root is None:
            return
        try:
            answer = self.client.holders(self.root, [p.inode for p in held])
        except LineageError:
            return
        streams = {p.inode: p.streams for p in held}
        with self._lock:
            known = {h.identity: h for h in self.holders}
            for h in answer.get("holders") or []:
                ident = "%d@%d" % (h["process"]["pid"], h["process"]["start"])
                holder = known.get(ident)
                if holder is None:
                    holder = Holder(h["process"]["pid"], h["process"]["start"], h.get("argv") or [],
                                    h.get("comm", ""), h.get("age_ns", 0) / 1e9, [])
                    known[ident] = holder
                    self.holders.append(holder)
                for fd in h.get("fds") or []:
                    for s in streams.get(fd["pipe"], []):
                        if s not in holder.streams:
                            holder.streams.append(s)

    # subprocess.Popen's methods.

    def poll(self) -> int | None:
        """The return code once the command has exited, else None."""
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.wait()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Waits for the command's own exit (not for its leftovers, not for
        its pipes); TimeoutExpired after ``timeout`` seconds."""
        if self.returncode is not None:
            return self.returncode
        if not select.select([self._pidfd], [], [], timeout)[0]:
            raise TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
        self._note_exit()
        self.returncode = self._proc.wait()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signals the command's own process, through its pidfd (never a
        reused pid)."""
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def end_lineage(self) -> dict[str, Any] | None:
        """Ends the command's whole lineage through the daemon, as a
        deadline does (terminated, killed after the daemon's grace, what
        the session keeps spared), and nothing else of the session;
        returns the daemon's report. When the daemon doesn't know the root
        yet (lineage exec had not registered it), the command's process is
        killed and the end asked again."""
        self._ended = True
        try:
            return self.client.end_root(self.root)
        except LineageError:
            pass
        self.kill()
        self.wait()
        try:
            return self.client.end_root(self.root)
        except LineageError as e:
            if e.code != "not_found":
                raise
        return None

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """subprocess's communicate: feeds ``input``, reads the output
        pipes until end of file or the hold delay's end, and waits for the
        command. ``TimeoutExpired`` (with the output so far) after
        ``timeout`` seconds; a later call goes on where it stopped."""
        out, err = self._communicate_raw(input, timeout)
        return self._decode(out), self._decode(err)

    def _decode(self, data: bytes | None) -> Any:
        if data is None or not self.text_mode:
            return data
        return data.decode(self._encoding, self._errors).replace("\r\n", "\n").replace("\r", "\n")

    def _communicate_raw(self, input: Any, timeout: float | None) -> tuple[bytes | None, bytes | None]:
        endtime = None if timeout is None else time.monotonic() + timeout
        if self._comm is None:
            self._comm = {"chunks": {id(p): [] for p in self._pipes}, "input": self._input_bytes(input), "off": 0}
        comm = self._comm
        if any(p.touched for p in self._pipes):
            self._communicate_threads(comm, endtime, timeout)
        else:
            self._communicate_select(comm, endtime, timeout)
        remaining = None if endtime is None else max(0.0, endtime - time.monotonic())
        try:
            self.wait(remaining)
        except TimeoutExpired:
            raise self._timeout(comm, timeout) from None
        return self._outputs(comm)

    def _input_bytes(self, input: Any) -> memoryview | None:
        if self.stdin is None:
            return None
        if input is None:
            try:
                self.stdin.close()
            except BrokenPipeError:
                pass
            return None
        if isinstance(input, str):
            input = input.encode(self._encoding, self._errors)
        self.stdin.flush()
        os.set_blocking(self.stdin.fileno(), False)
        return memoryview(input)

    def _outputs(self, comm: dict[str, Any]) -> tuple[bytes | None, bytes | None]:
        out = err = None
        for p in self._pipes:
            data = b"".join(comm["chunks"][id(p)])
            if p.streams[0] == "stdout":
                out = data
            else:
                err = data
        return out, err

    def _timeout(self, comm: dict[str, Any], timeout: float | None) -> TimeoutExpired:
        out, err = self._outputs(comm)
        return TimeoutExpired(self.args, timeout, output=out, stderr=err)  # type: ignore[arg-type]

    def _communicate_select(self, comm: dict[str, Any], endtime: float | None, timeout: float | None) -> None:
        """One thread: the pipes, stdin and the command's pidfd in one
        selector."""
        with selectors.DefaultSelector() as sel:
            for p in self._pipes:
                if not p.done:
                    sel.register(p.fd, selectors.EVENT_READ, p)
            if comm["input"] is not None and self.stdin is not None and not self.stdin.closed:
                sel.register(self.stdin.fileno(), selectors.EVENT_WRITE, "stdin")
            if self._exited_at is None:
                sel.register(self._pidfd, selectors.EVENT_READ, "exit")
            buf = bytearray(_CHUNK)
            while any(k.data not in ("exit",) for k in sel.get_map().values()):
                deadline = self._hold_deadline()
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self._drain(comm, buf)
                    self._give_up(self._pipes)
                    self._close_stdin(sel)
                    return
                wait = [t - now for t in (deadline, endtime) if t is not None]
                events = sel.select(max(0.0, min(wait)) if wait else None)
                if not events and endtime is not None and time.monotonic() >= endtime:
                    raise self._timeout(comm, timeout)
                for key, _ in events:
                    if key.data == "exit":
                        self._note_exit()
                        sel.unregister(self._pidfd)
                    elif key.data == "stdin":
                        self._feed(comm, sel)
                    else:
                        self._take(key.data, comm, buf, sel)

    def _take(self, p: _Pipe, comm: dict[str, Any], buf: bytearray, sel: selectors.BaseSelector) -> None:
        n = p.read_some(buf)
        if n:
            comm["chunks"][id(p)].append(bytes(buf[:n]))
        elif n == 0:
            sel.unregister(p.fd)

    def _drain(self, comm: dict[str, Any], buf: bytearray) -> None:
        """Takes what the pipes hold now, without waiting for more."""
        for p in self._pipes:
            while not p.done:
                n = p.read_some(buf)
                if not n:
                    break
                comm["chunks"][id(p)].append(bytes(buf[:n]))

    def _feed(self, comm: dict[str, Any], sel: selectors.BaseSelector) -> None:
        assert self.stdin is not None
        data, off = comm["input"], comm["off"]
        try:
            comm["off"] = off + os.write(self.stdin.fileno(), data[off:off + select.PIPE_BUF])
        except BlockingIOError:
            return
        except BrokenPipeError:
            comm["off"] = len(data)
        if comm["off"] >= len(data):
            self._close_stdin(sel)

    def _close_stdin(self, sel: selectors.BaseSelector) -> None:
        if self.stdin is not None and not self.stdin.closed:
            try:
                sel.unregister(self.stdin.fileno())
            except KeyError:
                pass
            try:
                self.stdin.close()
            except BrokenPipeError:
                pass

    def _communicate_threads(self, comm: dict[str, Any], endtime: float | None, timeout: float | None) -> None:
        """The streams were read through the handle (their buffers may hold
        data): read each to its end in a thread of its own."""
        threads = comm.setdefault("threads", [])
        if not threads:
            streams = [(p, self.stdout if p.streams[0] == "stdout" else self.stderr) for p in self._pipes]
            for p, stream in streams:
                def read(p: _Pipe = p, stream: Any = stream) -> None:
                    data = stream.read()
                    if isinstance(data, str):
                        data = data.encode(self._encoding, self._errors)
                    comm["chunks"][id(p)].append(data)
                t = threading.Thread(target=read, daemon=True)
                t.start()
                threads.append(t)
            if comm["input"] is not None and self.stdin is not None:
                def feed() -> None:
                    try:
                        os.set_blocking(self.stdin.fileno(), True)  # type: ignore[union-attr]
                        os.write(self.stdin.fileno(), comm["input"])  # type: ignore[union-attr]
                        self.stdin.close()  # type: ignore[union-attr]
                    except BrokenPipeError:
                        pass
                t = threading.Thread(target=feed, daemon=True)
                t.start()
        for t in threads:
            t.join(None if endtime is None else max(0.0, endtime - time.monotonic()))
            if t.is_alive():
                raise self._timeout(comm, timeout)

    def close(self) -> None:
        """Closes the pipes and the pidfd (the command runs on)."""
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        for p in self._pipes:
            p.close()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def __enter__(self) -> "Popen":
        return self

    def __exit__(self, *exc: object) -> None:
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        if self.stdin is not None:
            try:
                self.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.wait()
        finally:
            self.close()


def run(client: Client, args: Any, session: str, kind: str | None = None, label: str | None = None, *,
        input: Any = None, capture_output: bool = False, timeout: float | None = None, check: bool = False,
        **kwargs: Any) -> Completed:
    """``subprocess.run(args, ...)``, the command a root of ``session``.

    Every keyword keeps subprocess.run's meaning (``capture_output``,
    ``text``, ``input``, ``timeout``, ``check``, ``cwd``, ``env``,
    ``stdin``, ``stdout``, ``stderr``, ``shell``, ...), and ``hold_delay``
    (seconds, ``DEFAULT_HOLD_DELAY``) bounds the wait for the output pipes
    after the command exits. It returns within that delay of the command's
    own exit, however its leftovers hold its pipes, with all the output
    written until then; the ``Completed`` names those ``holders``. A
    ``timeout`` ends the command's whole lineage through the daemon and
    raises ``TimeoutExpired`` with the output so far. The session is
    checked first (opened with ``kind`` when it doesn't exist): a bad or
    foreign one raises ``LineageError``, an empty one ValueError, and
    nothing runs.
    """
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        kwargs["stdin"] = PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        kwargs["stdout"] = kwargs["stderr"] = PIPE
    with Popen(client, args, session, kind, label, **kwargs) as p:
        try:
            out, err = p.communicate(input, timeout=timeout)
        except TimeoutExpired as exc:
            p.end_lineage()
            p._communicate_raw(None, None)
            exc.output, exc.stderr = p._outputs(p._comm or {"chunks": {}})
            raise
        except BaseException:
            p.end_lineage()
            raise
        retcode = p.poll()
    assert retcode is not None
    if check and retcode:
        raise CalledProcessError(retcode, args, output=out, stderr=err)
    return Completed(args, retcode, out, err, holders=p.holders, root=p.root)
