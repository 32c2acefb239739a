"""The current diagnostics of a file, a folder or the workspace (the ``diagnostics`` tool
and ``diagnostics/get``).

A folder's files are those a server checks, found by a walk that skips hidden folders
and toold's SKIP_DIRS (.git, node_modules, virtualenvs), up to MAX_FILES files. A file
whose text is the one last checked answers from memory; the others are sent to their
servers and waited for within ``diagnostics.wait_ms``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from toold.diagnostics.service import DiagnosticsService
from toold.diagnostics.step import read_texts
from toold.sandbox.paths import workspace_relative
from toold.search.walk import SKIP_DIRS
from toold_protocol.models import Diagnostic

MAX_FILES = 200
"""Files of a folder checked at most (the rest are left out, and the answer says so)."""


@dataclass
class Survey:
    """What a survey found."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    checked: int = 0
    truncated: bool = False
    """The folder had more than MAX_FILES files to check."""


def _files(service: DiagnosticsService, relative: str) -> tuple[list[str], bool]:
    """The files below ``relative`` (a file: itself) that a server checks."""
    servers = service.servers()
    base = service.root if relative == "." else service.root / relative
    if not base.is_dir():
        return ([relative] if servers.for_file(relative) else []), False
    found: list[str] = []
    for folder, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(names):
            rel = Path(folder, name).relative_to(service.root).as_posix()
            if servers.for_file(rel):
                if len(found) == MAX_FILES:
                    return found, True
                found.append(rel)
    return found, False


async def survey(service: DiagnosticsService, path: str | None) -> Survey:
    """The diagnostics of ``path`` (a file or folder in the workspace; None: all of it);
    PermissionError for a path outside the workspace."""
    relative = "." if path is None else workspace_relative(service.root, path)
    files, truncated = await asyncio.to_thread(_files, service, relative)
    limit = service.config.limits.max_file_size
    texts = await asyncio.to_thread(read_texts, service.root, files, limit)
    stale = {
        rel: text
        for rel, text in texts.items()
        if text is not None and service.texts.get(rel) != text
    }
    result = Survey(checked=len(files), truncated=truncated)
    if stale:
        checked = await service.check(stale, service.wait)
        result.pending = checked.pending
    for rel in files:
        if rel not in result.pending:
            result.diagnostics += service.current(rel)
    return result
