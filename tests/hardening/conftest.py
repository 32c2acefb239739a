"""Hardening tests: see tests/hardening/support.py for the scale flag."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> None:
    """Let Hypothesis report a failure: its patch module imports a package that warns."""
    if getattr(item, "_hypothesis_failing_examples", None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with contextlib.suppress(ImportError):
                import hypothesis.extra._patching  # noqa: F401
