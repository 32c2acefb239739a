"""What this machine lacks: skipped on a developer's machine, a failure in CI."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """CI=true (as GitHub Actions, GitLab and .ci/run set it): a missing tool fails."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason``; in CI, which installs everything first, fail it."""
    if in_ci():
        pytest.fail(f"{reason} (CI installs it: see .ci/run)", pytrace=False)
    pytest.skip(reason)
