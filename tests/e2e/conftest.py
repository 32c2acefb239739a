from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient


@pytest.fixture
def client(workspace: Path) -> Iterator[WireClient]:
    c = WireClient(workspace)
    c.initialize(rootUri=workspace.as_uri())
    yield c
    c.close()


@pytest.fixture
def local_client(workspace: Path) -> Iterator[WireClient]:
    """A daemon on the local runner, for tests that read the host pids of what a command
    starts ($$, $!): inside the default bwrap sandbox's PID namespace they are not the
    host's (tests/sandbox check the cancel and the sweep inside bwrap)."""
    c = WireClient(workspace)
    c.initialize(
        rootUri=workspace.as_uri(),
        initializationOptions={"config": {"execution": {"tool_runner": "local"}}},
    )
    yield c
    c.close()


@pytest.fixture
def raw_client(workspace: Path) -> Iterator[WireClient]:
    """A daemon that has not been initialized yet."""
    c = WireClient(workspace)
    yield c
    c.close()
