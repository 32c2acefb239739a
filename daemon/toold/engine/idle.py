"""How long an idle engine stays up, and which idle engines give way to a new one.

Two rules bound the engines of one user (one runtime folder):

- **One-shot workspaces idle shorter.** Once a one-shot session ended (``toold call``,
  ``toold run``, a piped ``toold serve`` with no editor ``processId``), an engine no
  editor ever attached to stays up idle ``daemon.one_shot_idle_timeout`` seconds: 60 by
  default, 0 under ``CI=true`` (it exits as soon as its last session ends with nothing
  running). An editor's engine keeps ``daemon.idle_timeout``.
- **Idle engines are capped.** When an engine has bound its workspace it asks every
  other engine of the folder for its status, and asks the least recently used idle ones
  beyond ``daemon.max_idle_engines`` (itself counted) to stop *if still idle*: each
  decides on its own loop, at that instant, so one that a session, a job, a teammate
  or a connection in progress reached meanwhile stays. An engine that has served no
  session yet (just started for a client on its way) is not idle for its first
  ``FRESH`` seconds, so engines starting together never stop each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toold.engine.attach import EngineError, ask, running_engines
from toold.engine.sessions import Session, Sessions
from toold_protocol.names import JOBS_FINISHED, TEAM_MESSAGE

if TYPE_CHECKING:
    from toold.engine.location import EnginePaths

log = logging.getLogger(__name__)

ONE_SHOT_IDLE = 60.0
"""``daemon.one_shot_idle_timeout`` when unset (0 under ``CI=true``)."""
FRESH = 30.0
"""Seconds a new engine counts as busy until its first session comes (its client is on
its way: another engine's eviction must not stop it first)."""
ONE_SHOT_CLIENTS = frozenset({"toold-cli", "toold-run"})
"""What ``toold call``/``tools``/``jobs`` and ``toold run`` call themselves."""
REASON_LIMIT = 200
"""Characters of a stop-if-idle's ``reason`` the engine logs."""


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """``CI=true`` (or 1, yes), as GitHub Actions, GitLab CI and most others set it."""
    return environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def idle_limit(
    idle_timeout: float,
    one_shot_idle_timeout: float | None,
    *,
    editor_seen: bool,
    one_shot_ended: bool,
    ci: bool,
) -> float:
    """Seconds the engine may stay idle: ``idle_timeout``, or the one-shot rule's shorter
    time once a one-shot session ended and no editor ever attached."""
    if editor_seen or not one_shot_ended:
        return idle_timeout
    one_shot = one_shot_idle_timeout
    if one_shot is None:
        one_shot = 0.0 if ci else ONE_SHOT_IDLE
    return min(idle_timeout, one_shot)


def is_editor(kind: str, client: str, process_id: int | None) -> bool:
    """Whether a session was an editor's: ``toold serve`` handed its stdio over and its
    client named a process to follow (``processId``, ``--clientProcessId``) and is not
    one of toold's own one-shot commands; or an ACP or MCP client's (``toold acp``,
    ``toold mcp``: an editor or an agent's app starts and keeps them)."""
    if kind in ("acp", "mcp"):
        return True
    return kind == "stdio" and bool(process_id) and client not in ONE_SHOT_CLIENTS


def stop_reason(hello: Mapping[str, Any]) -> str:
    """Why the asker of a stop-if-idle says it asks (its hello's ``reason``), as the log
    shows it: printable, at most REASON_LIMIT characters. Any peer of the user may ask,
    so the pid beside it is the fact, this the asker's word."""
    reason = hello.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return "no reason given"
    return "".join(c if c.isprintable() else "?" for c in reason.strip()[:REASON_LIMIT])


def evicting_reason(own: EnginePaths, cap: int) -> str:
    """What a new or newly idle engine says when it asks an idle one to make room."""
    return (
        f"the least recently used idle engine beyond daemon.max_idle_engines = {cap} "
        f"(the engine of {own.workspace}, pid {os.getpid()}, made room)"
    )


def victims(others: list[dict[str, Any]], cap: int) -> list[dict[str, Any]]:
    """The engines to stop, least recently used first, so that at most ``cap`` idle
    engines remain counting the new one; ``others`` are their status answers (those of
    engines too old to say whether they are idle are left alone)."""
    idle = [status for status in others if status.get("idle") is True]
    idle.sort(key=lambda status: float(status.get("lastUsed", 0.0)), reverse=True)
    return idle[max(cap - 1, 0) :][::-1]


class Usage:
    """When the engine was last used, by what kind of client, and a wake-up for its
    idle watch when that changes."""

    def __init__(self) -> None:
        self.last_used = time.monotonic()
        """When a session last attached or ended, or the engine was last seen busy."""
        self.uses = 0
        """Bumped at each use: a stop ``ifIdle`` naming an older count is refused."""
        self.sessions = 0
        """Sessions ever attached."""
        self.editor_seen = False
        self.one_shot_ended = False
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def used(self) -> None:
        """Record a use now and wake the idle watch (from any thread)."""
        self.last_used = time.monotonic()
        self.uses += 1
        if self._loop is not None and self._changed is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to wake
                self._loop.call_soon_threadsafe(self._changed.set)

    def opened(self) -> None:
        """A session attached."""
        self.sessions += 1
        self.used()

    def ended(self, session: Session) -> None:
        """A session ended: it was an editor's, or a one-shot command's."""
        server = session.server
        process_id = server.client_process_id or getattr(server, "process_id", None)
        if is_editor(session.kind, session.describe()["client"], process_id):
            self.editor_seen = True
        else:
            self.one_shot_ended = True
        self.used()

    async def wait(self, timeout: float) -> None:
        """Until the next use, or ``timeout`` seconds."""
        if self._changed is None:
            self._loop, self._changed = asyncio.get_running_loop(), asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(timeout, 0.0)):
                await self._changed.wait()
        self._changed.clear()

    def idle_for(self) -> float:
        """Seconds since the last use."""
        return max(0.0, time.monotonic() - self.last_used)

    def last_used_at(self) -> float:
        """The last use as a wall-clock time (what ``daemon list`` sorts and shows)."""
        return time.time() - self.idle_for()


class TrackedSessions(Sessions):
    """The engine's sessions, each opening and end recorded in its Usage (and what the
    workspace pushes, a job's end say, counted as a use)."""

    def __init__(self, usage: Usage) -> None:
        super().__init__()
        self.usage = usage
        self._open: set[int] = set()

    def open(self, kind: str, server: Any, peer_pid: int, client: str) -> Session:
        """Register a new session, and count a use."""
        session = super().open(kind, server, peer_pid, client)
        self._open.add(session.id)
        self.usage.opened()
        return session

    def close(self, session: Session) -> None:
        """Forget a session that ended, recording what kind of client it was."""
        super().close(session)
        if session.id in self._open:
            self._open.discard(session.id)
            self.usage.ended(session)

    def push(self, method: str, params: dict[str, Any]) -> None:
        """Send a shared-state notification; a job's end or a team message is a use."""
        super().push(method, params)
        if method in (JOBS_FINISHED, TEAM_MESSAGE):  # not an outside edit's tasks/changed
            self.usage.used()


def resident_bytes() -> int:
    """This process's resident set size (``/proc/self/statm``), 0 when unreadable."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def inotify_instances() -> int:
    """inotify instances this process holds (``anon_inode:inotify`` descriptors)."""
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                    count += 1
    return count


def evict_idle(own: EnginePaths, cap: int) -> list[int]:
    """Ask the least recently used idle engines of ``own``'s runtime folder beyond
    ``cap`` to stop if still idle; the pids that agreed. Runs on a thread."""
    try:
        return _evict_idle(own, cap)
    except Exception:  # a thread's failure must not go unreported, nor end the engine
        log.exception("could not make room among the idle engines")
        return []


def _evict_idle(own: EnginePaths, cap: int) -> list[int]:
    others = []
    for paths, pid in running_engines(own.folder):
        if paths.key == own.key:
            continue
        try:
            status = ask(paths, "status", timeout=5.0)
        except (EngineError, OSError, ValueError) as exc:
            log.info("engine pid %d did not answer its status: %s", pid, exc)
            continue
        if status is not None:
            others.append({**status, "paths": paths})
    stopped = []
    for status in victims(others, cap):
        paths = status["paths"]
        hello = {"ifIdle": True, "uses": status.get("uses"), "reason": evicting_reason(own, cap)}
        try:
            reply = ask(paths, "stop", hello, timeout=5.0)
        except (EngineError, OSError, ValueError) as exc:
            log.info("engine pid %s did not stop: %s", status.get("pid"), exc)
            continue
        if reply is not None and reply.get("stopped"):
            log.info(
                "stopped the idle engine of %s (pid %s): daemon.max_idle_engines = %d",
                status.get("workspace"),
                status.get("pid"),
                cap,
            )
            stopped.append(int(reply["pid"]))
    return stopped
