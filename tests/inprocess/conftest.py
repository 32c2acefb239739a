"""Fixtures of the in-process tier (see client.py): a workspace and an initialized daemon."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inprocess.client import InProcessClient


@pytest.fixture
def client(workspace: Path) -> Iterator[InProcessClient]:
    """An initialized in-process daemon on ``workspace``; closed cleanly (exit code 0)."""
    c = InProcessClient(workspace)
    # No processId: the daemon would watch this very process.
    c.initialize(rootUri=workspace.as_uri(), processId=None)
    yield c
    assert c.close() == 0
