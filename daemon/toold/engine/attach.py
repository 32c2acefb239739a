"""The client side of the engine socket: connect, say hello, start an engine when none runs.

A connection opens with one JSON line from the client (``Hello``) and one from the
engine (``{"ok": true, "pid": ...}`` or ``{"ok": false, "error": ...}``); what follows
depends on the hello's kind: LSP frames for a ``session``, nothing for ``status`` and
``stop``. Starting is serialised by a lock file, so two clients starting at once end
with one engine; the engine itself holds a lock on its pid file for its whole life, so
a socket left by a dead engine is known stale and replaced. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from toold import __version__
from toold.engine.location import EnginePaths, engine_keys, open_private, runtime_dir

PROTOCOL = 3
"""Version of the hello line; the engine refuses a client speaking another (3: the
``acp`` kind, a ``toold acp``'s connection)."""
HANDED_STDIO = ("stdio", "mcp")
"""The kinds whose hello carries the client's stdin and stdout (``toold serve``'s LSP,
``toold mcp``'s MCP lines): the engine serves those descriptors and ends the session
with a line naming its exit status. (``mcp`` came within protocol 3: an engine older
than it refuses the kind, and ``toold daemon stop`` replaces it.)"""
MCP_HTTP = "mcp-http"
"""The kind whose hello carries a listening TCP socket (``toold mcp --http``): the engine
serves MCP over HTTP on it until the connection closes, and ends with a line naming its
exit status. (It came within protocol 3, as ``mcp`` did: an engine older than it refuses
the kind, and ``toold daemon stop`` replaces it.)"""
START_TIMEOUT = 60.0
"""Seconds a started engine has to listen (it imports its stack and binds first)."""
ENGINE_ARGV = ["-P", "-m", "toold.engine"]
STOPPING = "the engine is stopping; try again"
"""The engine's refusal of a connection that came while it stops (idle, evicted)."""
ATTEMPTS = 4
"""Connections ``attach`` tries: an engine on its way out is waited for, then replaced."""
CONTROL_TIMEOUT = 10.0
"""Seconds a ``status`` or ``stop`` answer may take (a hung engine holds up no list)."""


class EngineError(ConnectionError):
    """No engine could be reached or started; the message names the engine's log."""


class NoEngine(EngineError):
    """No engine runs for the workspace (and none was to be started)."""


class EngineGone(EngineError):
    """The engine stopped, or hung up, before answering the hello: it is on its way out."""


class Attachment:
    """A connection the engine accepted (a plain class: dataclasses would cost the
    command line an import of inspect)."""

    def __init__(
        self,
        sock: socket.socket,
        reader: IO[bytes],
        writer: IO[bytes],
        reply: dict[str, Any],
        paths: EnginePaths,
    ) -> None:
        self.sock, self.reader, self.writer = sock, reader, writer
        self.reply = reply
        """The engine's answer to the hello (its pid, version, session id)."""
        self.paths = paths

    def close(self) -> None:
        """Close the connection (for a session: the engine ends it, cancelling its calls)."""
        for stream in (self.reader, self.writer):
            with contextlib.suppress(OSError):
                stream.close()
        self.sock.close()


def engine_pid(paths: EnginePaths) -> int | None:
    """The pid of the engine running for the workspace, None when none runs.

    The engine holds an exclusive lock on its pid file while it lives: a lock we can
    take means the file (and any socket) was left by a dead engine.
    """
    try:
        fd = open_private(paths.pid_file, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1  # starting: the pid is being written
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _connect(paths: EnginePaths) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(paths.socket))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()  # none, or a stale socket from a dead engine: the next start replaces it
        return None
    except OSError:
        sock.close()
        raise
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", raw)
    if uid != os.getuid():  # planted while the folder was open: never say hello to it
        sock.close()
        raise EngineError(
            f"{paths.socket} is served by uid {uid}, not by you (uid {os.getuid()}): "
            f"remove it; the runtime folder {paths.folder} was open to others"
        )
    return sock


def _hello(
    sock: socket.socket,
    paths: EnginePaths,
    kind: str,
    extra: dict[str, Any],
    fds: list[int],
    timeout: float | None = None,
) -> Attachment:
    sock.settimeout(timeout)
    line = json.dumps(
        {"toold": PROTOCOL, "kind": kind, "version": __version__, "pid": os.getpid(), **extra}
    ).encode()
    if fds:
        sock.sendmsg(
            [line + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(_fd_array(fds)))]
        )
    else:
        sock.sendall(line + b"\n")
    reader = sock.makefile("rb")
    try:
        answer = reader.readline()
    except TimeoutError:
        reader.close()
        sock.close()
        raise EngineError(
            f"the toold engine for {paths.workspace} did not answer within {timeout:g} s; "
            f"see its log {paths.log}"
        ) from None
    if not answer:
        reader.close()
        sock.close()
        raise EngineGone(
            f"the toold engine for {paths.workspace} closed the connection without answering "
            f"(it may have crashed); see its log {paths.log}"
        )
    reply: dict[str, Any] = json.loads(answer)
    if not reply.get("ok"):
        reader.close()
        sock.close()
        error = f"the toold engine refused the connection: {reply.get('error')}"
        if str(reply.get("error")).startswith("bad hello: expected a toold hello of protocol"):
            error += (  # an engine of another toold: the one that started it stops it
                f" (this toold {__version__} speaks protocol {PROTOCOL}: stop that engine with"
                f" the toold that started it, `toold daemon stop --workspace {paths.workspace}`,"
                " and try again)"
            )
        raise EngineGone(error) if reply.get("error") == STOPPING else EngineError(error)
    sock.settimeout(None)
    if kind in ("session", "stdio", "acp", "mcp", MCP_HTTP) and reply.get("version") != __version__:
        print(
            f"toold: the running engine is toold {reply.get('version')}, this is toold "
            f"{__version__}: `toold daemon stop --workspace {paths.workspace}` restarts it "
            "with this version at the next call",
            file=sys.stderr,
        )
    return Attachment(sock, reader, sock.makefile("wb"), reply, paths)


def _fd_array(fds: list[int]) -> bytes:
    import array

    return array.array("i", fds).tobytes()


@contextlib.contextmanager
def _start_lock(paths: EnginePaths) -> Iterator[None]:
    fd = open_private(paths.start_lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def attach(
    workspace: Path,
    kind: str = "session",
    extra: dict[str, Any] | None = None,
    *,
    fds: list[int] | None = None,
    start: bool = True,
) -> Attachment:
    """Connect to the workspace's engine (starting one when ``start`` and none runs).

    A socket that accepts but never answers, while no engine holds the pid lock, is a
    dead engine's whose listening socket a surviving child still holds: it counts as
    none, and a fresh engine replaces it. An engine that stops while we attach (idle,
    or evicted for another: ``idle``) refuses or drops the connection: the next attempt
    finds it no longer listening and starts a fresh one, which waits for it to exit.
    """
    paths = EnginePaths.of(workspace)
    extra, fds = extra or {}, fds or []
    for attempt in range(ATTEMPTS):
        sock = _connect(paths)
        if sock is None or (attempt and engine_pid(paths) is None):
            if not start:
                raise NoEngine(f"no toold engine runs for {paths.workspace}")
            if sock is not None:
                sock.close()
            sock = _start(paths)
        try:
            return _hello(sock, paths, kind, extra, fds)
        except (ConnectionResetError, BrokenPipeError, EngineError) as exc:
            sock.close()
            gone = not isinstance(exc, EngineError) or isinstance(exc, EngineGone)
            if not start and gone:
                raise NoEngine(f"the toold engine for {paths.workspace} is stopping") from None
            if not gone or attempt == ATTEMPTS - 1:
                if isinstance(exc, EngineError):
                    raise
                raise EngineError(
                    f"the toold engine for {paths.workspace} dropped the connection ({exc}); "
                    f"see its log {paths.log}"
                ) from None
            time.sleep(0.01 * (attempt + 1))  # it closes its socket at once, exits soon after
    raise AssertionError("unreachable")


def _start(paths: EnginePaths) -> socket.socket:
    """Start an engine unless another client just did; the connection to it."""
    with _start_lock(paths):
        sock = _connect(paths) if engine_pid(paths) is not None else None
        if sock is None:
            spawn_engine(paths)
            sock = _connect(paths)
    if sock is None:
        raise EngineError(
            f"the toold engine for {paths.workspace} did not start; see its log {paths.log}"
        )
    return sock


STARTING_ENVIRONMENT = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ")
"""Variables the engine is started with, besides ``LC_*``, ``PYTHON*``, ``XDG_*``,
``TOOLD_*`` and ``VIRTUAL_ENV``; the rest of the environment arrives on a pipe."""


def starting_environment(environ: dict[str, str]) -> dict[str, str]:
    """What the engine's exec gets: what Python and toold need to start, no secret
    (``/proc/PID/environ`` shows it for the engine's whole life)."""
    from toold.permissions.redaction import is_secret_variable

    prefixes = ("LC_", "PYTHON", "XDG_", "TOOLD_")
    return {
        name: value
        for name, value in environ.items()
        if (name in STARTING_ENVIRONMENT or name.startswith(prefixes) or name == "VIRTUAL_ENV")
        and not is_secret_variable(name, value)
    }


def spawn_engine(paths: EnginePaths) -> None:
    """Start a detached engine (its own session, not our child) and wait until it listens.

    The engine writes one line on an inherited pipe once it listens; a pipe closed
    without it means the engine died, and the error names its log. Its environment
    (secrets included) is written on another pipe, so none is in the one it execs with.
    """
    if paths.log.exists():
        os.replace(paths.log, paths.log.with_suffix(".log.1"))  # the last engine's, kept once
    log_fd = open_private(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    ready_r, ready_w = os.pipe()
    env_r, env_w = os.pipe()
    environ = dict(os.environ)
    argv = [sys.executable, *ENGINE_ARGV, "--workspace", os.fspath(paths.workspace)]
    argv += ["--ready-fd", "3", "--env-fd", "4"]
    exec_env = starting_environment(environ)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child execs or exits at once
        try:
            os.setsid()
            if os.fork():
                os._exit(0)
            os.setpgid(0, 0)  # the engine leads its own process group (kill -- -PID ends all)
            # Above 4 first: dup2 onto 3 and 4 must not close the other pipe's end.
            ready, env = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (ready_w, env_r))
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.dup2(ready, 3)
            os.dup2(env, 4)
            os.chdir(paths.workspace)
            os.execve(sys.executable, argv, exec_env)
        finally:
            os._exit(127)
    os.close(ready_w)
    os.close(env_r)
    os.close(log_fd)
    try:
        _write_all(env_w, json.dumps(environ).encode())
    except OSError:
        pass  # the engine died before reading it: its ready pipe says so below
    finally:
        os.close(env_w)
    os.waitpid(pid, 0)
    try:
        answer = _read_ready(ready_r, START_TIMEOUT)
    finally:
        os.close(ready_r)
    if not answer:
        tail = _log_tail(paths.log)
        raise EngineError(
            f"the toold engine for {paths.workspace} exited while starting; see its log "
            f"{paths.log}" + (f": {tail}" if tail else "")
        )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_ready(fd: int, timeout: float) -> bytes:
    import select

    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b""
        chunk = os.read(fd, 64)
        if not chunk:
            return b""
        data += chunk
    return data


def _log_tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def control(workspace: Path, kind: str) -> dict[str, Any] | None:
    """Ask the running engine for ``status`` or to ``stop``; None when none runs."""
    return ask(EnginePaths.of(workspace), kind)


def ask(
    paths: EnginePaths,
    kind: str,
    extra: dict[str, Any] | None = None,
    timeout: float = CONTROL_TIMEOUT,
) -> dict[str, Any] | None:
    """The answer of the engine at ``paths`` to a ``status`` or ``stop`` hello (``extra``
    added to it); None when none runs there or it is stopping. EngineError when it
    refuses, or does not answer within ``timeout`` seconds."""
    try:
        sock = _connect(paths)
    except OSError as exc:
        raise EngineError(f"cannot reach the toold engine at {paths.socket}: {exc}") from None
    if sock is None:
        return None
    try:
        attached = _hello(sock, paths, kind, extra or {}, [], timeout)
    except (ConnectionResetError, BrokenPipeError, EngineGone):
        sock.close()
        return None
    try:
        if kind == "stop":
            attached.sock.settimeout(timeout)
            with contextlib.suppress(OSError):
                attached.reader.read()  # the engine closes the connection once it answered
        return attached.reply
    finally:
        attached.close()


def running_engines(folder: Path | None = None) -> list[tuple[EnginePaths, int]]:
    """Every engine running in the runtime folder, with its pid (the workspace each
    serves as its command line names it; its ``status`` says for sure)."""
    folder = runtime_dir() if folder is None else folder
    found = []
    for key in engine_keys(folder):
        paths = EnginePaths.keyed(folder, key)
        try:
            pid = engine_pid(paths)
        except OSError:
            continue  # not a file of ours (refused by open_private): not an engine
        if pid is not None and pid > 0:
            found.append((EnginePaths.keyed(folder, key, _served(pid)), pid))
    return found


def _served(pid: int) -> Path | None:
    """The ``--workspace`` of process ``pid``'s command line (None when unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except OSError:
        return None
    for flag, value in itertools.pairwise(argv):
        if flag == b"--workspace":
            return Path(os.fsdecode(value))
    return None
