"""Fixtures for unit tests: a real workspace on tmp_path and a way to call its tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toold.tools import get_handlers

Call = Callable[..., Any]
Put = Callable[[str, str | bytes], Path]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty, resolved workspace folder (with room for siblings next to it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()


@pytest.fixture
def call(workspace: Path) -> Call:
    """``call(name, **args)`` runs the tool bound to ``workspace`` and returns its result."""
    handlers = get_handlers(workspace)

    def _call(name: str, /, **args: Any) -> Any:
        return asyncio.run(handlers[name](**args))

    return _call


@pytest.fixture
def put(workspace: Path) -> Put:
    """``put(rel, data)`` writes a file (text as UTF-8, or bytes) under the workspace."""

    def _put(rel: str, data: str | bytes) -> Path:
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_bytes(data.encode("utf-8"))
        return target

    return _put
