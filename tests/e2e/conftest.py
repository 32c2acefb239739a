"""tests/e2e spawns ``toold serve`` (and the CLI) for what only a process shows: exit codes,
signals, stdin that is a file or a pipe, the client process dying, logs, command-line
flags, the relay to the workspace's shared engine. Handler behaviour is tested in process
through tests/interaction's ``lsp`` and ``connect`` fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient


@pytest.fixture
def raw_client(workspace: Path) -> Iterator[WireClient]:
    """A spawned daemon that has not been initialized yet."""
    c = WireClient(workspace)
    yield c
    c.close()
