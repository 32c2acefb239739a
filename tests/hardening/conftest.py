"""Hardening tests: see tests/hardening/support.py for the scale flag."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest

from tests.hardening.support import FULL

FULL_TIMEOUT = 4 * 3600  # seconds per test under TOOLD_FULL_HARDENING=1


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> None:
    """Let Hypothesis report a failure: its patch module imports a package that warns."""
    if getattr(item, "_hypothesis_failing_examples", None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with contextlib.suppress(ImportError):
                import hypothesis.extra._patching  # noqa: F401


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Full-size runs take hours: lift the suite's per-test timeout for them."""
    if FULL:
        for item in items:
            item.add_marker(pytest.mark.timeout(FULL_TIMEOUT))
