"""The workspace watchers, run for real on a bound workspace: with inotify, and polling
(TOOLD_WATCH_POLLING=1, as when inotify is refused: toold.watching)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from toold.assembly import bind
from toold.watch import watch_workspace
from toold.watching import POLLING_ENV
from toold.workspace import WorkspaceState
from toold_protocol import METHODS, names

WAIT_S = 5.0


@pytest.fixture(autouse=True, params=["inotify", "polling"])
def watch_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each scenario with inotify, and again polling (each change seen within a sweep)."""
    if request.param == "polling":
        monkeypatch.setenv(POLLING_ENV, "1")


class Watched:
    """A bound workspace with its watchers running, collecting what they push and report."""

    def __init__(self, root: Path, overrides: dict[str, Any] | None = None) -> None:
        self.pushed: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.reports: asyncio.Queue[str] = asyncio.Queue()
        self.state: WorkspaceState = bind(root, overrides, self.push, self.reports.put_nowait)

    def push(self, method: str, params: dict[str, Any]) -> None:
        METHODS[method].params.model_validate(params)
        self.pushed.put_nowait((method, params))

    async def next_push(self, method: str) -> dict[str, Any]:
        while True:
            got, params = await asyncio.wait_for(self.pushed.get(), WAIT_S)
            if got == method:
                return params


def run(root: Path, scenario: Callable[[Watched], Awaitable[None]], **kw: Any) -> None:
    async def main() -> None:
        watched = Watched(root, **kw)
        watcher = asyncio.ensure_future(watch_workspace(watched.state, watched.reports.put_nowait))
        try:
            await asyncio.wait_for(watched.state.watching.wait(), WAIT_S)
            await scenario(watched)
        finally:
            watcher.cancel()
            await asyncio.wait_for(asyncio.gather(watcher, return_exceptions=True), WAIT_S)
            await watched.state.jobs.close()

    asyncio.run(main())


def write_skill(folder: Path, name: str, text: str) -> None:
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "SKILL.md").write_text(text, encoding="utf-8")


def test_config_edit_keeps_the_editors_overrides(workspace: Path) -> None:
    async def scenario(w: Watched) -> None:
        (workspace / "toold.toml").write_text("[limits]\nbash_output_chars = 2000\n")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while w.state.config.limits.bash_output_chars != 2000:
            assert loop.time() < deadline, "toold.toml was not reloaded"
            await asyncio.sleep(0.01)
        assert w.state.config.http.timeout == 7.0  # from initializationOptions, still there
        (workspace / "toold.toml").write_text("[limits]\nbash_output_chars = 5\n")
        report = await asyncio.wait_for(w.reports.get(), WAIT_S)
        assert "limits.bash_output_chars" in report
        assert w.state.config.limits.bash_output_chars == 2000

    run(workspace, scenario, overrides={"http": {"timeout": 7}})


def test_skills_folder_created_late_then_replaced(workspace: Path) -> None:
    skills = workspace / ".toold" / "skills"

    async def scenario(w: Watched) -> None:
        write_skill(skills, "late", "Arrived late.")
        pushed = await w.next_push(names.SKILLS_CHANGED)
        assert {"late": "Arrived late."}.items() <= {
            s["name"]: s["description"] for s in pushed["skills"]
        }.items()
        # The folder goes away and comes back: both are seen.
        shutil.rmtree(skills)
        pushed = await w.next_push(names.SKILLS_CHANGED)
        assert "late" not in {s["name"] for s in pushed["skills"]}
        write_skill(skills, "again", "Back again.")
        pushed = await w.next_push(names.SKILLS_CHANGED)
        assert "again" in {s["name"] for s in pushed["skills"]}

    run(workspace, scenario)


def test_own_writes_and_other_files_notify_nothing(workspace: Path) -> None:
    async def scenario(w: Watched) -> None:
        w.state.tasks.create("mine")
        assert (await w.next_push(names.TASKS_CHANGED))["tasks"][0]["title"] == "mine"
        (workspace / "unrelated.txt").write_text("x")
        (workspace / ".toold" / "skills-not").mkdir()
        # An outside edit after those: the next notification must be for it.
        text = (workspace / ".tasks.json").read_text().replace('"mine"', '"theirs"')
        (workspace / ".tasks.json").write_text(text)
        method, params = await asyncio.wait_for(w.pushed.get(), WAIT_S)
        assert (method, params["tasks"][0]["title"]) == (names.TASKS_CHANGED, "theirs")

    run(workspace, scenario)
