"""A client for the lineage sidecar (``lineage serve``), standard library only.

It speaks the daemon's HTTP/JSON API (docs/api.md) over its Unix socket with
``http.client``, so a ``Client`` may be shared by threads. The daemon
authorises by the caller's uid (``SO_PEERCRED``): what this process may
register, see, keep or close is what its uid may.

    from lineage_client import Client

    c = Client()                                   # $LINEAGE_SOCKET, else /run/lineage/lineage.sock
    done = c.run(["make", "test"], session="turn-7", kind="autonomous", capture_output=True)
    print(done.returncode, done.holders)           # back when make exits, whoever holds its pipes
    ended = c.turn_end("turn-7")                   # autonomous: reap what make left
    c.session_close("turn-7")

``Client.run`` is ``subprocess.run`` with the command a root of the session
from its first instruction (it starts through ``lineage exec``), and it
returns within ``hold_delay`` seconds of the command's own exit even when
leftovers hold its output pipes, naming them as ``holders``. ``Client.popen``
is the same as a ``subprocess.Popen``-like handle, for streaming.

Every error the API answers raises ``LineageError`` with its ``code``
(``invalid``, ``forbidden``, ``not_found``, ``conflict``, ...) and message;
a daemon that can't be reached raises it with code ``unavailable``.

The package also holds a pytest plugin (``pytest --lineage``): see
``lineage_client.pytest_plugin``.
"""

from ._client import DEFAULT_SOCKET, Client, Ended, LineageError
from ._run import DEFAULT_HOLD_DELAY, DEVNULL, PIPE, STDOUT, Completed, Holder, Popen

__all__ = [
    "Client", "Completed", "DEFAULT_HOLD_DELAY", "DEFAULT_SOCKET", "DEVNULL", "Ended", "Holder",
    "LineageError", "PIPE", "Popen", "STDOUT",
]
__version__ = "0.1.0"
