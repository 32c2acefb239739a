"""DiagnosticsService: one workspace's language servers and what they last said.

A server starts on the first check of a file it matches, stays warm, is stopped after
``diagnostics.idle_seconds`` unused, and is started again after a crash: at once the
first time, then after a backoff that doubles (up to MAX_BACKOFF) while it keeps
crashing. A check never waits past its budget: what a server has not answered by then is
pending, finishes in the background (up to LATE_LIMIT) and is announced to the listeners
(``diagnostics/changed``). A server that cannot start is named once, then left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from toold.config import TooldConfig
from toold.connection import ResponseError
from toold.diagnostics.client import LanguageServer, ServerGone
from toold.diagnostics.launch import Launcher
from toold.diagnostics.report import normalise, ordered
from toold.diagnostics.servers import Servers, ServerSpec, language_id, resolved
from toold.sandbox.runner import ToolRunner
from toold_protocol.models import Diagnostic, DiagnosticsChanged

log = logging.getLogger(__name__)

LATE_LIMIT = 30.0
"""Seconds a check left pending may still take before it is given up."""
MAX_BACKOFF = 30.0
"""Longest wait before a server that keeps crashing is started again."""

Listener = Callable[[DiagnosticsChanged], None]


@dataclass
class _Slot:
    """One configured server: its running process, if any, and its crash history."""

    spec: ServerSpec
    server: LanguageServer | None = None
    starting: asyncio.Task[LanguageServer] | None = None
    crashes: int = 0
    not_before: float = 0.0
    idle: asyncio.TimerHandle | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class Checked:
    """A check's answer: diagnostics by file and server, and what did not answer."""

    found: dict[tuple[str, str], list[Diagnostic]] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


class Unavailable(Exception):
    """The server cannot be used now (it failed to start, or waits out its backoff)."""


class DiagnosticsService:
    """The language servers of one workspace, and their diagnostics by file."""

    def __init__(
        self, root: Path, config: Callable[[], TooldConfig], runner: ToolRunner | None = None
    ) -> None:
        self.root = root
        self._config = config
        self.launcher = Launcher(root, runner)
        self.listeners: list[Listener] = []
        self._slots: dict[str, _Slot] = {}
        self._named: set[str] = set()
        self.known: dict[str, dict[str, list[Diagnostic]]] = {}
        """Each file's last diagnostics, by server name."""
        self.texts: dict[str, str] = {}
        """The text each file had when it was last checked."""
        self._late: set[asyncio.Task[None]] = set()
        self._guarded: asyncio.AbstractEventLoop | None = None
        self._guards: list[AsyncGenerator[None, None]] = []

    @property
    def config(self) -> TooldConfig:
        """The workspace's configuration in force."""
        return self._config()

    @property
    def enabled(self) -> bool:
        """``diagnostics.enabled``."""
        return self._config().diagnostics.enabled

    @property
    def wait(self) -> float:
        """A check's budget in seconds (``diagnostics.wait_ms``)."""
        return self._config().diagnostics.wait_ms / 1000

    def servers(self) -> Servers:
        """The servers of the configuration in force (resolved again when it changes)."""
        return resolved(self._config().diagnostics)

    def running(self) -> dict[str, LanguageServer]:
        """The servers running now, by name."""
        return {n: s.server for n, s in self._slots.items() if s.server is not None}

    def current(self, relative: str) -> list[Diagnostic]:
        """The file's diagnostics as last checked (every server's)."""
        return ordered(d for found in self.known.get(relative, {}).values() for d in found)

    def name_missing(self, relatives: list[str]) -> list[str]:
        """The servers these files need that are not installed, each named once."""
        named = []
        servers = self.servers()
        for relative in relatives:
            for spec in servers.missing_for(relative):
                if spec.name not in self._named:
                    self._named.add(spec.name)
                    named.append(f"{spec.name} ({spec.argv[0]}) is not installed")
        return named

    async def check(self, texts: dict[str, str], budget: float) -> Checked:
        """Send each file's text to its servers and gather their diagnostics within
        ``budget`` seconds; what is late is announced to the listeners when it comes."""
        checked = Checked(missing=self.name_missing(list(texts)))
        servers = self.servers()
        tasks: dict[asyncio.Task[list[Diagnostic]], tuple[str, str]] = {}
        for relative, text in texts.items():
            for spec in servers.for_file(relative):
                slot = self._slots.setdefault(spec.name, _Slot(spec))
                if slot.spec != spec:  # the configuration changed its command: a new start
                    await self._stop(slot)
                    slot.spec, slot.crashes, slot.not_before = spec, 0, 0.0
                    self._named.discard(spec.name)
                task = asyncio.create_task(self._check_one(slot, relative, text))
                tasks[task] = (relative, spec.name)
        if not tasks:
            return checked
        done, late = await asyncio.wait(tasks, timeout=budget)
        for task in done:
            relative, name = tasks[task]
            try:
                checked.found[(relative, name)] = task.result()
            except Unavailable as exc:
                if name not in self._named:
                    self._named.add(name)
                    checked.missing.append(str(exc))
            except (ServerGone, TimeoutError) as exc:
                log.info("diagnostics of %s from %s: %s", relative, name, exc)
                checked.pending.append(relative)
        for task in late:
            relative, name = tasks[task]
            checked.pending.append(relative)
            watcher = asyncio.create_task(self._announce_late(task, relative, name))
            self._late.add(watcher)
            watcher.add_done_callback(self._late.discard)
        checked.pending = sorted(set(checked.pending))
        return checked

    async def _announce_late(
        self, task: asyncio.Task[list[Diagnostic]], relative: str, name: str
    ) -> None:
        """A pending check's diagnostics, announced when they come (given up after LATE_LIMIT)."""
        try:
            await asyncio.wait_for(task, LATE_LIMIT)
        except (Unavailable, ServerGone, TimeoutError) as exc:
            log.info("late diagnostics of %s from %s: %s", relative, name, exc)

    async def _check_one(self, slot: _Slot, relative: str, text: str) -> list[Diagnostic]:
        """One file's diagnostics from one server (started if need be), kept as known."""
        async with slot.lock:  # one document sync and answer at a time per server
            server = await self._running(slot)
            uri = (self.root / relative).as_uri()
            server.sync(uri, language_id(relative), text)
            raw = await server.diagnose(uri, LATE_LIMIT)
        slot.crashes = 0
        found = [d for d in (normalise(relative, item) for item in raw) if d is not None]
        self._remember(relative, slot.spec.name, text, found)
        return found

    def forget(self, relatives: list[str]) -> None:
        """These files are gone: what was known of them is dropped, and a file that had
        diagnostics is announced with none."""
        for relative in relatives:
            had = self.current(relative)
            self.known.pop(relative, None)
            self.texts.pop(relative, None)
            if had:
                self._announce(DiagnosticsChanged(path=relative, diagnostics=[]))

    def _remember(self, relative: str, name: str, text: str, found: list[Diagnostic]) -> None:
        before = self.current(relative)
        self.known.setdefault(relative, {})[name] = found
        self.texts[relative] = text
        now = self.current(relative)
        if now != before:
            self._announce(DiagnosticsChanged(path=relative, diagnostics=now))

    def _announce(self, event: DiagnosticsChanged) -> None:
        """Tell every listener (the workspace's sessions: diagnostics/changed)."""
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                log.exception("a diagnostics/changed listener failed")

    async def _running(self, slot: _Slot) -> LanguageServer:
        """The slot's server, started (or restarted after a crash) if need be."""
        server = slot.server
        loop = asyncio.get_running_loop()
        if server is not None and server.loop is not loop:  # a loop that has ended
            server.kill()
            slot.server = server = None
        if server is not None and not server.exited.is_set():
            self._touch(slot)
            return server
        if server is not None:  # it crashed since its last use
            log.warning("language server %s exited (%s)", slot.spec.name, server.crash_report())
            slot.server = None
            slot.crashes += 1
            delay = 0.0 if slot.crashes == 1 else min(2.0 ** (slot.crashes - 2), MAX_BACKOFF)
            slot.not_before = time.monotonic() + delay
        if time.monotonic() < slot.not_before:
            raise Unavailable(f"{slot.spec.name} keeps crashing: started again in a moment")
        launch = self.launcher.launch(slot.spec, self._config())
        server = LanguageServer(
            slot.spec.name,
            launch.argv,
            launch.env,
            self.root,
            cwd=launch.cwd,
            parent_pid=launch.parent_pid,
        )
        try:
            await server.start()
        except (OSError, ResponseError) as exc:  # cannot run, or refused to initialize
            await server.stop()
            slot.not_before = float("inf")  # named once; a new configuration tries again
            raise Unavailable(
                f"{slot.spec.name} ({slot.spec.argv[0]}) cannot start: {exc}"
            ) from None
        except (ServerGone, TimeoutError):
            await server.stop()
            slot.crashes += 1
            slot.not_before = time.monotonic() + min(2.0**slot.crashes, MAX_BACKOFF)
            raise
        log.info(
            "language server %s started (pid %s, %s)", slot.spec.name, server.pid, launch.sandbox
        )
        slot.server = server
        self._touch(slot)
        if self._guarded is not loop:
            self._guarded = loop
            await _guard_loop(self)
        return server

    def _touch(self, slot: _Slot) -> None:
        """Put off the slot's idle stop."""
        if slot.idle is not None:
            slot.idle.cancel()
        idle = self._config().diagnostics.idle_seconds
        loop = asyncio.get_running_loop()
        slot.idle = loop.call_later(idle, lambda: self._idle_stop(slot))

    def _idle_stop(self, slot: _Slot) -> None:
        if slot.lock.locked():  # busy after all: idle from now on
            self._touch(slot)
        else:
            task = asyncio.ensure_future(self._stop(slot))
            self._late.add(task)
            task.add_done_callback(self._late.discard)

    async def _stop(self, slot: _Slot) -> None:
        server, slot.server = slot.server, None
        if slot.idle is not None:
            slot.idle.cancel()
            slot.idle = None
        if server is not None:
            await server.stop()

    async def aclose(self) -> None:
        """Stop every server (shutdown, then their process groups killed)."""
        for task in list(self._late):
            task.cancel()
        for slot in self._slots.values():
            with contextlib.suppress(Exception):
                await self._stop(slot)

    async def abandon(self) -> None:
        """The loop ends: every server of it killed at once, its pipes closed."""
        for task in list(self._late):
            task.cancel()
        for slot in self._slots.values():
            server, slot.server = slot.server, None
            if slot.idle is not None:
                slot.idle.cancel()
                slot.idle = None
            if server is not None:
                await server.stop(grace=0)

    def kill(self) -> None:
        """Kill every server's process group at once (no loop needed: the daemon exits)."""
        for slot in self._slots.values():
            if slot.server is not None:
                slot.server.kill()


async def _until_the_loop_ends(service: DiagnosticsService) -> AsyncGenerator[None, None]:
    """Suspended until the loop shuts its async generators down (asyncio.run's end, the
    daemon's exit): then the servers go with it, while it can still close their pipes."""
    try:
        yield
    finally:
        await service.abandon()


async def _guard_loop(service: DiagnosticsService) -> None:
    """Tie the service's servers to the running loop's end."""
    guard = _until_the_loop_ends(service)
    await guard.asend(None)
    service._guards.append(guard)  # held: a collected generator would be closed early
