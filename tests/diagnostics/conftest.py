"""Fixtures for the diagnostics tests: a workspace whose calls go through the gateway
with real language servers (``ruff server``, installed with the dev extra)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_gateway
from tests.interaction.lsp_front import InProcessDaemon
from toold.config import TooldConfig
from toold.diagnostics.servers import find_program
from toold.diagnostics.service import DiagnosticsService
from toold.diagnostics.step import service_for
from toold.gateway import ToolGateway
from toold.sandbox.runner import ToolRunner
from toold.tools import BuiltinToolProvider, ToolOutcome, ToolRuntime, ToolSet
from toold.tools.context import CallContext

UNUSED_OS = {
    "path": "a.py",
    "line": 1,
    "column": 8,
    "severity": "warning",
    "message": "`os` imported but unused\n\nhelp: Remove unused import: `os`",
    "source": "Ruff",
    "code": "F401",
}
"""ruff's diagnostic of ``import os`` in ``a.py``, as the wire carries it."""


def ruff_defaults(root: Path) -> None:
    """ruff's own default rules in ``root``, whatever the folders above configure."""
    (root / "ruff.toml").write_text('[lint]\nselect = ["E4", "E7", "E9", "F"]\n')


class Edits:
    """A workspace's tools called as the user through one gateway, in a running loop."""

    def __init__(self, root: Path, config: TooldConfig, runner: ToolRunner | None) -> None:
        self.root = root
        self.runtime = ToolRuntime(workspace=root, config=config)
        self.gateway: ToolGateway = user_gateway(
            ToolSet(BuiltinToolProvider(self.runtime).get_tools()), runner
        )
        self.runner = runner

    async def call(self, name: str, /, **args: Any) -> ToolOutcome:
        """One call through ``ToolGateway.call``; a failed call fails the test."""
        outcome = await self.gateway.call(name, args, CallContext(origin="user"))
        assert not outcome.is_error, outcome.content
        return outcome

    @property
    def service(self) -> DiagnosticsService:
        """The workspace's diagnostics service (the one the gateway's step uses)."""
        return service_for(self.runtime, self.runner)


MakeEdits = Callable[..., Edits]


@pytest.fixture
def ruff() -> str:
    """The ruff program (the dev extra installs it; its absence fails, never skips)."""
    found = find_program("ruff")
    assert found, "ruff is not installed: pip install -e '.[dev]'"
    return found


@pytest.fixture
def edits_with(tmp_path: Path, ruff: str) -> MakeEdits:
    """``edits_with(config={...}, runner=None)``: an Edits over a fresh workspace."""

    def make(config: dict[str, Any] | None = None, runner: ToolRunner | None = None) -> Edits:
        root = tmp_path / "ws"
        root.mkdir(exist_ok=True)
        ruff_defaults(root)
        return Edits(root.resolve(), TooldConfig.model_validate(config or {}), runner)

    return make


@pytest.fixture
def root(tmp_path: Path, ruff: str) -> Path:
    """A workspace with ruff's default rules."""
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    ruff_defaults(ws)
    return ws


@pytest.fixture
def client(root: Path) -> Iterator[InProcessDaemon]:
    """An initialized in-process daemon on ``root``."""
    c = InProcessDaemon(root)
    c.initialize(rootUri=root.as_uri(), processId=None)
    yield c
    assert c.close() == 0
