from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engine.support import Engines


@pytest.fixture
def engines() -> Iterator[Engines]:
    """The CLI and editors of one test, attached to engines that are all stopped after it."""
    box = Engines()
    try:
        yield box
    finally:
        box.close()
