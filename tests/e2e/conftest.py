from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print('needle')\n", encoding="utf-8")
    (ws / "src" / "helper.txt").write_text("needle line\n", encoding="utf-8")
    return ws


@pytest.fixture
def client(workspace: Path) -> Iterator[WireClient]:
    c = WireClient(workspace)
    c.initialize(rootUri=workspace.as_uri())
    yield c
    c.close()


@pytest.fixture
def raw_client(workspace: Path) -> Iterator[WireClient]:
    """A daemon that has not been initialized yet."""
    c = WireClient(workspace)
    yield c
    c.close()
