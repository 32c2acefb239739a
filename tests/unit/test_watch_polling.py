"""The workspace watchers' promises kept while polling (TOOLD_WATCH_POLLING=1, as when
inotify is refused): toold.toml reloads (held loosenings included), skills/changed and
the tasks file, each seen within a sweep or two."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit import test_watch
from toold.watching import POLLING_ENV


@pytest.fixture(autouse=True)
def polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POLLING_ENV, "1")


def test_config_edit_keeps_the_editors_overrides(workspace: Path) -> None:
    test_watch.test_config_edit_keeps_the_editors_overrides(workspace)


def test_skills_folder_created_late_then_replaced(workspace: Path) -> None:
    test_watch.test_skills_folder_created_late_then_replaced(workspace)


def test_own_writes_and_other_files_notify_nothing(workspace: Path) -> None:
    test_watch.test_own_writes_and_other_files_notify_nothing(workspace)
