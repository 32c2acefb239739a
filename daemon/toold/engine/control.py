"""The engine's answers to control hellos: ``status`` and ``stop``, which are no session.

``status`` is what ``toold daemon status`` and ``daemon list`` print; ``stop`` ends the
engine (``toold daemon stop``: refused to a tool call's command, as the engine it runs in
is not an agent's to stop), and ``stop`` with ``ifIdle`` ends it only if it is idle at
that instant (``Engine.evict``: a newer engine making room, ``toold daemon stop
--if-idle``). Each is one JSON line back (``send_line``); the connection then closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import TYPE_CHECKING, Any

from toold import __version__
from toold.engine.idle import inotify_instances, resident_bytes
from toold.engine.peers import HELLO_TIMEOUT, PeerRefused

if TYPE_CHECKING:
    from toold.engine.engine import Engine

CONTROL = ("status", "stop")
"""The hellos' kinds that ask the engine something instead of opening a session."""


async def answer_control(
    engine: Engine, conn: socket.socket, pid: int, hello: dict[str, Any]
) -> None:
    """Answer peer ``pid``'s control hello (a kind in CONTROL) on ``conn``."""
    if hello["kind"] == "status":
        await send_line(conn, status(engine))
        return
    if hello.get("ifIdle"):
        stopped = engine.evict(hello, pid)
        await send_line(conn, {"ok": True, "pid": os.getpid(), "stopped": stopped})
        return
    if engine.inside_tool_call(pid):
        raise PeerRefused("a tool call cannot stop the engine it runs in")
    running = status(engine)["jobs"]
    reply = {
        "ok": True,
        "pid": os.getpid(),
        "workspace": os.fspath(engine.paths.workspace),
        "cancelled": [j["jobId"] for j in running],
    }
    await send_line(conn, reply)
    engine.stop(f"toold daemon stop (pid {pid})")


def status(engine: Engine) -> dict[str, Any]:
    """What ``toold daemon status`` and ``daemon list`` print."""
    jobs = engine.state.jobs.list() if engine.state is not None else []
    limit, _ = engine.idle_limit()
    idle = not engine.busy()
    return {
        "ok": True,
        "pid": os.getpid(),
        "version": __version__,
        "workspace": os.fspath(engine.paths.workspace),
        "socket": os.fspath(engine.paths.socket),
        "log": os.fspath(engine.paths.log),
        "startedAt": engine.started,
        "sessions": [s.describe() for s in engine.sessions.all()],
        "jobs": [
            {"jobId": j["job_id"], "command": j["command"], "startedAt": j["started_at"]}
            for j in jobs
            if j.get("status") == "running"
        ],
        "idle": engine.evictable(),
        "idleFor": engine.usage.idle_for() if idle else None,
        "idleLimit": None if limit == float("inf") else limit,
        "lastUsed": engine.usage.last_used_at(),
        "uses": engine.usage.uses,
        "rss": resident_bytes(),
        "inotify": inotify_instances(),
    }


async def send_line(conn: socket.socket, message: dict[str, Any]) -> None:
    """One JSON line to a client, without blocking the loop on one that never reads."""
    async with asyncio.timeout(HELLO_TIMEOUT):
        await asyncio.get_running_loop().sock_sendall(conn, json.dumps(message).encode() + b"\n")
