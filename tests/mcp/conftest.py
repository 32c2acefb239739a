"""``toold mcp`` as users run it: attached to the engine of its workspace.

Every test of this folder runs with a runtime folder of its own (``TOOLD_RUNTIME_DIR``)
and without ``TOOLD_NO_DAEMON`` (dropped should the caller's environment set it), so
each stdio ``toold mcp`` hands its stdio to the workspace's engine, and each ``toold mcp
--http`` its listening socket; the engines are stopped at the test's end. A test of the
private server passes ``--no-daemon``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.support import Engines


@pytest.fixture(autouse=True)
def engines(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engines]:
    """The engines of this test, under its own runtime folder, all stopped at its end;
    ``os.environ`` points there (what ``tests.mcp.stdio.toold_mcp`` hands the process)."""
    box = Engines()
    monkeypatch.setenv("TOOLD_RUNTIME_DIR", os.fspath(box.runtime))
    monkeypatch.delenv("TOOLD_NO_DAEMON", raising=False)
    try:
        yield box
    finally:
        box.close()


@pytest.fixture
def runtime(engines: Engines) -> Path:
    """This test's runtime folder."""
    return engines.runtime
