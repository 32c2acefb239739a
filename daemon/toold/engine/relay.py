"""``toold serve``: the editor's stdio, attached to the workspace's engine.

Editors change nothing: they start ``toold serve`` and speak LSP-framed JSON-RPC on
its stdin and stdout. The relay finds the workspace (``--workspace``, else the first
message, ``initialize``: its ``initializationOptions.workspace``, ``workspaceFolders``,
``rootUri`` or ``rootPath``, else the current folder), attaches to that workspace's
engine (starting one if needed) and hands it its stdin and stdout descriptors, then
sends the bytes it read to find the workspace: the engine reads and answers the editor
directly, so no byte passes through the relay. The engine ends the session with a line
naming the exit status, which becomes the relay's; a relay that dies (its connection
closes) ends the session at once, its calls cancelled. Standard library only.
``toold mcp`` hands its stdio over the same way (``hand_over``, a hello of kind ``mcp``).

Once the engine holds the pipes, the relay re-executes itself as a bare interpreter
(``python -I -S``, nothing imported but ``ctypes``) that only waits for that line: an
idle relay then costs what an empty interpreter does (about 9 MiB, not 20), whatever
``toold``'s command line imported to get there. The exec keeps the pid the editor
watches; the waiter gives the editor's pipes up (the engine has them), starts with an
empty environment and makes itself non-dumpable again (the flag resets on exec).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from toold.engine.attach import EngineError, attach

if TYPE_CHECKING:
    import socket

PEEK_LIMIT = 64 * 1024 * 1024
"""Largest first message read to find the workspace (beyond it: the current folder)."""
IN_PROCESS_ENV = "TOOLD_RELAY_IN_PROCESS"
"""Set to 1: the relay waits for the session's end in this process, as it is (a
debugging aid: the bare waiter cannot be traced with Python's tools)."""
WAITER = """# toold serve: the relay of a session, waiting for its end
import sys
try:
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
except Exception:
    pass
import os
fd, data = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
while b"\\n" not in data:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
line = data.partition(b"\\n")[0].strip()
code = None
if line.startswith(b'{"exit": ') and line.endswith(b"}") and line[9:-1].isdigit():
    code = int(line[9:-1])
elif line:
    import json
    try:
        end = json.loads(line)
        code = end["exit"] if isinstance(end, dict) and type(end.get("exit")) is int else None
    except ValueError:
        pass
if code is None:
    print(sys.argv[3], file=sys.stderr)
    code = 1
raise SystemExit(code)
"""
"""What the relay becomes once the engine holds the pipes (argv: the connection's
descriptor, the bytes already read from it in hex, the message for a missing status).
The first line is ``{"exit": N}`` as the engine writes it; any other spelling is
parsed as JSON, which only then costs the import of ``json`` (and ``re``)."""


def _read_first_frame(fd: int) -> tuple[bytes, dict[str, Any] | None]:
    """The bytes of stdin up to the end of the first frame, and that frame's JSON."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data, None
        data += chunk
    head, sep, body = data.partition(b"\r\n\r\n")
    length = None
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    if not sep or length is None or length > PEEK_LIMIT:
        return data, None
    while len(body) < length:
        chunk = os.read(fd, max(65536, length - len(body)))
        if not chunk:
            return data, None
        data += chunk
        body += chunk
    try:
        message = json.loads(body[:length])
    except ValueError:
        return data, None
    return data, message if isinstance(message, dict) else None


def _uri_path(uri: Any) -> Path | None:
    if not isinstance(uri, str):
        return None
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def workspace_of(message: dict[str, Any] | None) -> Path | None:
    """The workspace an ``initialize`` names, in the daemon's order of precedence."""
    if message is None or message.get("method") != "initialize":
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    options = params.get("initializationOptions")
    if isinstance(options, dict) and isinstance(options.get("workspace"), str):
        return Path(options["workspace"])
    folders = params.get("workspaceFolders")
    if isinstance(folders, list) and folders and isinstance(folders[0], dict):
        found = _uri_path(folders[0].get("uri"))
        if found is not None:
            return found
    found = _uri_path(params.get("rootUri"))
    if found is not None:
        return found
    root_path = params.get("rootPath")
    return Path(root_path) if isinstance(root_path, str) else None


def relay(
    workspace: Path | None,
    *,
    client_process_id: int | None = None,
    max_message_bytes: int | None = None,
) -> int:
    """Serve stdin/stdout through the engine; the session's exit status."""
    preface = b""
    if workspace is None:
        preface, first = _read_first_frame(sys.stdin.fileno())
        workspace = workspace_of(first) or Path.cwd()
    if not workspace.is_dir():
        print(f"toold: workspace {workspace} is not a folder", file=sys.stderr)
        return 2
    extra = {
        "client": "toold serve",
        "clientProcessId": client_process_id,
        "maxMessageBytes": max_message_bytes,
        "prefaceBytes": len(preface),
    }
    return hand_over(workspace, "stdio", extra, preface)


def hand_over(workspace: Path, kind: str, extra: dict[str, Any], preface: bytes = b"") -> int:
    """Attach to ``workspace``'s engine with a ``kind`` hello carrying this process's stdin
    and stdout, send ``preface`` (the bytes already read from stdin), then wait, as the
    bare waiter, for the line naming the session's exit status: that status. The one
    handover of ``toold serve`` and ``toold mcp``."""
    try:
        attached = attach(workspace, kind, extra, fds=[sys.stdin.fileno(), sys.stdout.fileno()])
        # After the answer: the engine bounds a hello to a few KiB, and an initialize
        # may be megabytes.
        if preface:
            attached.sock.sendall(preface)
    except (EngineError, OSError) as exc:
        print(f"toold: {exc}", file=sys.stderr)
        return 1
    # The client's log shows where the work happens (the engine logs to its own file).
    logging.getLogger(__name__).info(
        "toold serving %s through its engine (pid %s); the engine's log: %s",
        attached.paths.workspace,
        attached.reply.get("pid", "?"),
        attached.paths.log,
    )
    # The engine reads and writes the client's pipes itself; this connection only says
    # when the session ends (and, closed by our death, ends it).
    crashed = (
        f"toold: the engine for {attached.paths.workspace} ended the session without a "
        f"status (it may have crashed); see its log {attached.paths.log}"
    )
    _become_waiter(attached.sock, attached.reader, crashed)  # returns only if exec failed
    line = attached.reader.readline()
    try:
        end = json.loads(line) if line else None
    except ValueError:
        end = None
    if not isinstance(end, dict) or not isinstance(end.get("exit"), int):
        print(crashed, file=sys.stderr)
        return 1
    return int(end["exit"])


def _become_waiter(sock: socket.socket, reader: IO[bytes], crashed: str) -> None:
    """Replace this process by ``WAITER`` on the engine connection; returns if it cannot."""
    if not sys.executable or os.environ.get(IN_PROCESS_ENV, "") not in ("", "0"):
        return
    read = _buffered(sock, reader)  # bytes the reader took past the engine's reply
    try:
        os.set_inheritable(sock.fileno(), True)
        devnull = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(0), os.dup(1)]
    # The engine has its own copies of the editor's pipes: the waiter keeps none, so
    # nothing of the editor's is open in it before it is non-dumpable again.
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    argv = [sys.executable, "-I", "-S", "-c", WAITER, str(sock.fileno()), read.hex(), crashed]
    try:
        os.execve(sys.executable, argv, {})
    except OSError:
        os.dup2(saved[0], 0, inheritable=True)
        os.dup2(saved[1], 1, inheritable=True)
        for fd in saved:
            os.close(fd)
        os.set_inheritable(sock.fileno(), False)


def _buffered(sock: socket.socket, reader: IO[bytes]) -> bytes:
    """What ``reader`` holds already read from ``sock``, without waiting for more."""
    sock.setblocking(False)
    try:
        peek = getattr(reader, "peek", None)
        return bytes(peek(1)) if peek is not None else b""
    except BlockingIOError:
        return b""
    finally:
        sock.setblocking(True)
