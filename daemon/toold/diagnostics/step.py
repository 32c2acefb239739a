"""The gateway's diagnostics step: what a file-changing call did to its files' diagnostics.

``before_call`` notes the text of each file the call will write (before the guard or
the tool ran; nothing of it is shown unless the call then runs and writes); ``after_call``
compares the servers' diagnostics of that text with those of the text written, and
returns the outcome with ``diagnostics`` set and the new ones added to its text. A file
whose last checked text is the one before the call needs no second check. The step never
fails a call and never waits past ``diagnostics.wait_ms`` in all.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import stat
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.config import TooldConfig
from toold.diagnostics.servers import resolved
from toold.outcome import ToolOutcome
from toold.sandbox.paths import open_in_workspace, workspace_relative
from toold.sandbox.runner import ToolRunner
from toold.tools.base import Tool
from toold.tools.runtime import ToolRuntime

if TYPE_CHECKING:
    from toold.diagnostics.service import DiagnosticsService
    from toold_protocol.models import Diagnostic, DiagnosticsChanged, DiagnosticsDelta

log = logging.getLogger(__name__)

MAX_WATCHED = 200
"""Files whose diagnostics one write is compared on at most (a restore of a shell call's
checkpoint may put back thousands; the rest are left to diagnostics/get)."""

_SERVICES: dict[int, DiagnosticsService] = {}
"""Each bound workspace's service, by its ToolRuntime's id (dropped when it is collected)."""
_WIRING: dict[int, tuple[ToolRunner | None, Callable[[DiagnosticsChanged], None]]] = {}
"""What ``wire`` was told for a workspace whose service is not made yet."""


def wire(
    runtime: ToolRuntime,
    runner: ToolRunner | None,
    on_change: Callable[[DiagnosticsChanged], None],
) -> None:
    """bind(): where the workspace's servers run and where every change of a file's
    diagnostics goes (its sessions), before any file is checked. Nothing loads here: the
    service is made with the first file a server checks."""
    key = id(runtime)
    _WIRING[key] = (runner, on_change)
    weakref.finalize(runtime, _WIRING.pop, key, None)


async def release(runtime: ToolRuntime) -> None:
    """The workspace closes: its servers are shut down (the last step of aclose)."""
    _WIRING.pop(id(runtime), None)
    service = _SERVICES.pop(id(runtime), None)
    if service is not None:
        await service.aclose()


def service_for(runtime: ToolRuntime, runner: ToolRunner | None) -> DiagnosticsService:
    """The workspace's diagnostics service, made on first use; its servers are killed
    when the runtime goes away, and at the latest when the daemon exits."""
    # Imported here: the servers' client (and the protocol's models) load with the first
    # file a server checks, not with every front end that imports the gateway.
    from toold.diagnostics.service import DiagnosticsService

    key = id(runtime)
    service = _SERVICES.get(key)
    if service is not None and runner is not None and service.launcher.runner is None:
        service.launcher.runner = runner  # made by the diagnostics tool, which has none
    if service is None:
        wired_runner, on_change = _WIRING.get(key, (None, None))
        # Held weakly: the service (kept in _SERVICES) must not keep its workspace alive.
        alive = weakref.ref(runtime)
        service = DiagnosticsService(
            runtime.workspace, lambda: _config_of(alive), runner or wired_runner
        )
        if on_change is not None:
            service.listeners.append(on_change)
        _SERVICES[key] = service
        weakref.finalize(runtime, _forget, key)
    return service


def _config_of(alive: weakref.ref[ToolRuntime]) -> TooldConfig:
    """The workspace's configuration in force (the defaults once it is gone)."""
    runtime = alive()
    return runtime.config if runtime is not None else TooldConfig()


def _forget(key: int) -> None:
    service = _SERVICES.pop(key, None)
    if service is not None:
        service.kill()


@atexit.register
def _kill_all() -> None:
    """The daemon exits: no server outlives it (bwrap's are also --die-with-parent)."""
    for service in list(_SERVICES.values()):
        service.kill()


@dataclass
class Watch:
    """A call's files as they were before it ran."""

    service: DiagnosticsService
    before: dict[str, str | None]
    """Each file's text before the call, by its path in the workspace (None: no file)."""


async def before_call(tool: Tool, arguments: Any, runner: ToolRunner | None) -> Watch | None:
    """The call's files that a language server checks, with their text now; None when
    diagnostics are off or no server (installed or not) matches them."""
    runtime = getattr(tool, "runtime", None)
    if not isinstance(runtime, ToolRuntime) or not runtime.config.diagnostics.enabled:
        return None
    try:
        paths = tool.written_paths(tool.validate_args(arguments))
    except Exception:  # the gateway refuses such a call itself, with the reason
        return None
    return await watch_files(runtime, runner, paths) if paths else None


async def watch_files(
    runtime: ToolRuntime, runner: ToolRunner | None, paths: Iterable[str]
) -> Watch | None:
    """These files (absolute, or relative to the workspace) that a language server
    checks, with their text now, before something writes them (a tool call, a restore);
    None when diagnostics are off or no server matches them. At most MAX_WATCHED files."""
    if not runtime.config.diagnostics.enabled:
        return None
    servers = resolved(runtime.config.diagnostics)
    relatives: list[str] = []
    for path in paths:
        try:
            relative = workspace_relative(runtime.workspace, path)
        except PermissionError:
            continue
        if servers.for_file(relative) or servers.missing_for(relative):
            relatives.append(relative)
    if not relatives:
        return None
    limit = runtime.config.limits.max_file_size
    texts = await asyncio.to_thread(read_texts, runtime.workspace, relatives[:MAX_WATCHED], limit)
    return Watch(service_for(runtime, runner), texts)


def read_texts(root: Path, relatives: list[str], limit: int) -> dict[str, str | None]:
    """Each file's text (None: missing, over ``limit`` bytes, or not UTF-8)."""
    return {relative: _read(root, relative, limit) for relative in relatives}


def _read(root: Path, relative: str, limit: int) -> str | None:
    """The file's text, never through a symlink; None when it is missing, too big or not
    UTF-8 (such a file is compared with nothing)."""
    try:
        # O_NONBLOCK: a FIFO named like a source file must not hold the thread.
        fd = open_in_workspace(root, relative, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


async def after_call(watch: Watch, outcome: ToolOutcome) -> ToolOutcome:
    """The outcome with the diagnostics its call introduced or fixed (text and field)."""
    if outcome.is_error or not outcome.written:
        return outcome
    from toold.diagnostics.report import render

    delta = await delta_of(watch)
    if delta is None:
        return outcome
    text = render(delta)
    content = outcome.content
    if text and isinstance(content, str):
        content = f"{content}\n\n{text}" if content else text
    return replace(outcome, content=content, diagnostics=delta)


async def delta_of(watch: Watch, written: Iterable[str] | None = None) -> DiagnosticsDelta | None:
    """What writing the watched files (those of them in ``written``, when given) did to
    their diagnostics, within ``diagnostics.wait_ms``; None when it could not be told
    (logged: diagnostics never fail what wrote the files)."""
    if written is not None:
        kept = set(written)
        watch = Watch(watch.service, {p: t for p, t in watch.before.items() if p in kept})
        if not watch.before:
            return None
    service = watch.service
    try:
        return await _delta(watch, service, time.monotonic() + service.wait)
    except Exception:
        log.exception("diagnostics after %s failed", ", ".join(watch.before))
        return None


async def _delta(watch: Watch, service: DiagnosticsService, deadline: float) -> DiagnosticsDelta:
    """Check the old texts the service has not seen, then the new ones, in the budget."""
    from toold.diagnostics.report import compare
    from toold.diagnostics.service import Checked

    old = {rel: text for rel, text in watch.before.items() if text is not None}
    unseen = {rel: text for rel, text in old.items() if service.texts.get(rel) != text}
    baseline = Checked()
    if unseen:
        baseline = await service.check(unseen, max(0.0, deadline - time.monotonic()))
    for rel in old.keys() - unseen.keys():
        for name, found in service.known.get(rel, {}).items():
            baseline.found[(rel, name)] = found
    limit = service.config.limits.max_file_size
    texts = await asyncio.to_thread(read_texts, service.root, list(watch.before), limit)
    now = {rel: text for rel, text in texts.items() if text is not None}
    checked = await service.check(now, max(0.0, deadline - time.monotonic()))
    before: list[Diagnostic] = []
    after: list[Diagnostic] = []
    pending = set(checked.pending) | set(baseline.pending)
    for (rel, name), found in checked.found.items():
        if rel in watch.before and watch.before[rel] is None:
            after += found  # a new file: everything in it is new
        elif (rel, name) in baseline.found:
            before += baseline.found[(rel, name)]
            after += found
        else:
            pending.add(rel)
    # A file the write removed (a restore of a created file): its diagnostics went with it.
    gone = [rel for rel in old if rel not in now and not _exists(service.root, rel)]
    for (rel, _name), found in baseline.found.items():
        if rel in gone:
            before += found
    service.forget(gone)
    delta = compare(before, after)
    delta.pending = sorted(pending)
    delta.missing = [*baseline.missing, *checked.missing]
    return delta


def _exists(root: Path, relative: str) -> bool:
    """Something is at ``relative`` (a file too big or not UTF-8 is not a removed one)."""
    return os.path.lexists(root / relative)
