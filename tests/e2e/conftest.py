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
def raw_client(workspace: Path) -> Iterator[WireClient]:
    """A daemon that has not been initialized yet."""
    c = WireClient(workspace)
    yield c
    c.close()
