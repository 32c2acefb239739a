"""Swap races: a folder and a file swapped for symlinks to the outside while tools run.

A racer process keeps swapping ``race/`` (a real folder) for a symlink to ``outside/``,
``race/sub`` for a link to ``outside/sub``, and ``race/secret.txt`` for a link to the
outside canary, while every listing, search and file tool is called over and over
(200 rounds per call at CI scale, 3,000 under TOOLD_FULL_HARDENING=1), in process
through the local runner and inside bubblewrap. Outside, every file holds a secret
token, every name carries it and every mtime is 2001-09-09: no result may show any of
them, nothing outside may change, and no descriptor is kept once the calls are done
(each refused walk once kept one of the workspace root).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import secrets
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from tests.hardening.support import scale
from tests.sandbox.conftest import bwrap_ready  # noqa: F401 (fixture)
from tests.waiting import wait_until
from toold.config import TooldConfig
from toold.sandbox.runners import make_runner
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

ROUNDS = scale(200, 3_000)
OLD_MTIME = 1_000_000_000  # 2001-09-09T01:46:40Z
BURST = 50

CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("list_dir", {"path": "race"}),
    ("list_dir", {"path": "race/sub"}),
    ("file_info", {"path": "race/secret.txt"}),
    ("file_info", {"path": "race/sub/deep.txt"}),
    ("glob", {"pattern": "*", "path": "race"}),
    ("glob", {"pattern": "**"}),
    ("glob_search", {"pattern": "*", "path": "race", "include_hidden": True}),
    ("glob_search", {"pattern": "**/*.txt"}),
    ("grep", {"pattern": "CANARY", "path": "race"}),  # ripgrep prefilter
    ("grep", {"pattern": "C[A]NARY|inside"}),  # no literal: the walk alone
    ("grep", {"pattern": "CANARY", "path": "race/secret.txt"}),
    ("grep_search", {"query": "CANARY", "path": "race"}),
    ("grep_search", {"query": "CAN.RY", "regex": True}),
    ("read_file", {"file_path": "race/secret.txt"}),
    ("read_file", {"file_path": "race/sub/deep.txt"}),
    ("write_file", {"file_path": "race/sub/new.txt", "content": "PWNED"}),
    ("write_file", {"file_path": "race/secret.txt", "content": "inside\n", "append": True}),
    ("str_replace", {"path": "race/secret.txt", "old": "inside", "new": "inside"}),
)


@dataclass
class Race:
    root: Path
    ws: Path
    outside: Path
    token: str

    @property
    def leaks(self) -> tuple[str, ...]:
        return (self.token, "2001-09-09")


def build(root: Path) -> Race:
    """The workspace with its real ``race`` folder, and canaries outside."""
    token = secrets.token_hex(8)
    ws, outside = root / "ws", root / "outside"
    race = Race(root, ws, outside, token)
    for path in (outside / "secret.txt", outside / "sub" / "deep.txt"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"CANARY-{token} secret\n", encoding="utf-8")
    (outside / f"name-{token}.txt").write_text(f"CANARY-{token}\n", encoding="utf-8")
    (outside / f"dir-{token}").mkdir()
    for path in outside.rglob("*"):
        os.utime(path, (OLD_MTIME, OLD_MTIME), follow_symlinks=False)
    (ws / "race" / "sub").mkdir(parents=True)
    (ws / "race" / "secret.txt").write_text("inside\n", encoding="utf-8")
    (ws / "race" / "sub" / "deep.txt").write_text("inside deep\n", encoding="utf-8")
    return race


def snapshot(outside: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry outside: type, size, mtime, content hash."""
    seen: dict[str, tuple[Any, ...]] = {}
    for top, dirs, files in os.walk(outside, followlinks=False):
        for name in dirs + files:
            path = os.path.join(top, name)
            info = os.lstat(path)
            digest = None
            if stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            seen[path] = (info.st_mode, info.st_size, info.st_mtime_ns, digest)
    return seen


def open_descriptors() -> dict[int, str]:
    """This process's open descriptors and what each names (``/proc/self/fd``)."""
    held = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            held[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return held


def _toggle(name: str, real: str, target: str) -> None:
    """``name`` becomes a link to ``target``, then the real one again."""
    for step, args in (
        (os.rename, (name, real)),
        (os.symlink, (target, name)),
        (os.unlink, (name,)),
        (os.rename, (real, name)),
    ):
        # A tool's own write may have replaced a file meanwhile: keep swapping.
        with contextlib.suppress(OSError):
            step(*args)


def _swap(ws: str, outside: str, swaps: Any, stop: Any) -> None:
    """In another process: swap the folder, a sub-folder and a file for links, and back.

    Each in bursts of BURST toggles, so a tool's check-then-use window often holds a swap.
    """
    race = os.path.join(ws, "race")
    pairs = (
        (race, f"{ws}/race.real", outside),  # race -> outside
        (f"{race}/sub", f"{race}/sub.real", f"{outside}/sub"),
        (f"{race}/secret.txt", f"{race}/secret.real", f"{outside}/secret.txt"),
    )
    while not stop.is_set():
        for name, real, target in pairs:
            for _ in range(BURST):
                _toggle(name, real, target)
        with swaps.get_lock():
            swaps.value += 1


def _restore(ws: Path) -> None:
    """Put the real folder, sub-folder and file back after the racer stopped."""
    race = ws / "race"
    if race.is_symlink():
        race.unlink()
    if (ws / "race.real").exists():
        (ws / "race.real").rename(race)
    for link, real in (("sub", "sub.real"), ("secret.txt", "secret.real")):
        if (race / link).is_symlink():
            (race / link).unlink()
        if (race / real).exists():
            (race / real).rename(race / link)


def run_races(race: Race, runner_name: str) -> Counter[str]:
    """Every call ROUNDS times against the racer; returns outcome counts per tool."""
    # No folders created: a write while race/ is away must not put a real one in its place.
    settings = {"execution": {"tool_runner": runner_name}, "files": {"create_dirs": False}}
    config = TooldConfig.model_validate(settings)
    context = multiprocessing.get_context("spawn")
    swaps, stop = context.Value("i", 0), context.Event()
    descriptors = open_descriptors()
    runtime = ToolRuntime(workspace=race.ws, config=config)
    toolset = ToolSet(BuiltinToolProvider(runtime).get_tools())
    runner = make_runner(config, race.ws)
    assert runner.name == runner_name, runner.problem
    missing = {name for name, _ in CALLS} - set(toolset.names())
    assert not missing, f"tools missing: {missing}"
    before = snapshot(race.outside)
    racer = context.Process(target=_swap, args=(race.ws, race.outside, swaps, stop))
    counts: Counter[str] = Counter()
    leaks: Counter[str] = Counter()
    first: dict[str, Any] = {}

    async def calls() -> None:
        try:
            for _ in range(ROUNDS):
                for name, args in CALLS:
                    outcome = await user_call(toolset, name, args, runner=runner)
                    text = repr(outcome.content)
                    marker = next((m for m in race.leaks if m in text), None)
                    if marker is not None:
                        leaks[name] += 1
                        first.setdefault(name, (marker, args, text[:300]))
                    counts[f"{name}:{'error' if outcome.is_error else 'ok'}"] += 1
        finally:
            await runner.close()

    racer.start()
    try:
        wait_until(lambda: swaps.value > 0, "the racer to start", 60)
        asyncio.run(calls())
    finally:
        stop.set()
        racer.join(timeout=30)
        _restore(race.ws)
    assert not leaks, f"outside content leaked ({runner_name}): {dict(leaks)}; first: {first}"
    assert racer.exitcode == 0
    racer.close()
    held = open_descriptors()
    kept = {fd: target for fd, target in held.items() if target.startswith(str(race.root))}
    assert not kept, f"descriptors kept after the races ({runner_name}): {kept}"
    assert len(held) <= len(descriptors), (descriptors, held)
    assert swaps.value > 0
    assert snapshot(race.outside) == before, "something outside changed"
    print(f"{runner_name}: {swaps.value} swap rounds; outcomes {dict(sorted(counts.items()))}")
    return counts


def _check_counts(counts: Counter[str]) -> None:
    """Each tool answered, and the races did bite (some calls refused)."""
    for name in {name for name, _ in CALLS}:
        assert counts[f"{name}:ok"] > 0, (name, counts)
    assert sum(n for key, n in counts.items() if key.endswith(":error")) > 0, counts


@pytest.fixture
def race(tmp_path: Path) -> Race:
    return build(tmp_path.resolve())


def test_swap_races_through_the_local_runner_show_nothing_outside(race: Race) -> None:
    _check_counts(run_races(race, "local"))


@pytest.mark.usefixtures("bwrap_ready")
def test_swap_races_inside_bwrap_show_nothing_outside(race: Race) -> None:
    _check_counts(run_races(race, "bwrap"))


def test_the_walk_refuses_a_folder_swapped_between_its_listing_and_its_descent(
    race: Race,
) -> None:
    """Deterministic: the listing saw a folder; by the time the walk descends it is a link."""
    from toold.search.walk import Tree

    with Tree(race.ws, ".") as tree:
        seen = []
        for found in tree.files():
            seen.append(found.path)
            if found.path == "race/secret.txt":
                # The walk stands in race/ and has listed sub/ as a folder: swap it now.
                os.rename(race.ws / "race" / "sub", race.ws / "race" / "sub.real")
                (race.ws / "race" / "sub").symlink_to(race.outside / "sub")
        assert seen == ["race/secret.txt"]  # race/sub/deep.txt: refused, not outside's


def test_a_file_swapped_after_the_listing_is_not_read(race: Race) -> None:
    from toold.search.walk import Tree

    with Tree(race.ws, "race") as tree:
        for found in tree.files():
            if found.name == "secret.txt":
                os.rename(race.ws / "race" / "secret.txt", race.ws / "race" / "secret.real")
                (race.ws / "race" / "secret.txt").symlink_to(race.outside / "secret.txt")
                assert found.read(1 << 20) is None  # O_NOFOLLOW: refused
