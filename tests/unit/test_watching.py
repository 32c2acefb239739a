"""The workspace's one watcher (toold.watching), run for real: one inotify instance shared
by every subscriber, bounded reads, floods coalesced, and polling when inotify is refused.

Refusals are real too: a process in a user namespace of its own lowers that namespace's
inotify limits (/proc/sys/user/max_inotify_*), so the kernel answers ENOSPC or EMFILE
without touching the limits of the other programs on this machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from toold.inotify import READ_BYTES, Inotify, filesystem_type, remote_filesystem
from toold.polling import POLL_S
from toold.watching import MAX_PENDING, FolderWatch, WatchHub

WAIT_S = 5.0


def inotify_fds(pid: int | str = "self") -> int:
    """inotify instances held by process ``pid``."""
    fds = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd) == "anon_inode:inotify"
        except OSError:
            continue
    return count


async def batch_with(watch: FolderWatch, wanted: Path, timeout: float = WAIT_S) -> set[Path]:
    """The first batch naming ``wanted``."""
    async with asyncio.timeout(timeout):
        async for batch in watch.batches():
            if wanted in batch:
                return batch
    raise AssertionError("the watch closed")


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def test_every_subscriber_shares_one_instance(tmp_path: Path) -> None:
    root, skills, mail = tmp_path, tmp_path / "skills", tmp_path / "mail"
    (skills / "deep").mkdir(parents=True)
    mail.mkdir()

    async def scenario() -> None:
        before = inotify_fds()
        hub = WatchHub()
        try:
            files = await hub.watch([root], recursive=False).start()
            tree = await hub.watch([skills], recursive=True).start()
            box = await hub.watch([mail], recursive=False).start()
            again = await hub.watch([root], recursive=False).start()  # one folder, two
            assert hub.instances == 1 and inotify_fds() == before + 1
            (skills / "deep" / "SKILL.md").write_text("x")
            assert skills / "deep" / "SKILL.md" in await batch_with(
                tree, skills / "deep" / "SKILL.md"
            )
            (mail / "main.jsonl").write_text("{}\n")
            await batch_with(box, mail / "main.jsonl")
            again.close()  # the other subscriber of the root keeps its watch
            (root / "toold.toml").write_text("")
            await batch_with(files, root / "toold.toml")
            assert hub.polled() == []
        finally:
            hub.close()
        assert inotify_fds() == before

    run(scenario)


def test_new_folders_of_a_recursive_watch_are_watched(tmp_path: Path) -> None:
    async def scenario() -> None:
        hub = WatchHub()
        try:
            watch = await hub.watch([tmp_path], recursive=True).start()
            (tmp_path / "a").mkdir()
            await batch_with(watch, tmp_path / "a")
            (tmp_path / "a" / "f").write_text("x")
            await batch_with(watch, tmp_path / "a" / "f")
        finally:
            hub.close()

    run(scenario)


def test_one_read_is_bounded(tmp_path: Path) -> None:
    inotify = Inotify()
    try:
        inotify.add(tmp_path)
        for i in range(5000):
            (tmp_path / f"f{i:05}").touch()
        first = inotify.read_events()
        # Each event is at least 16 bytes of header and 16 of padded name.
        assert 0 < len(first) <= READ_BYTES // 32
        assert inotify.read_events(), "one read took every event: the loop would wait on it"
    finally:
        inotify.close()


def test_the_filesystem_type_is_statfs_s(tmp_path: Path) -> None:
    shown = subprocess.run(["stat", "-f", "-c", "%t", str(tmp_path)], capture_output=True)
    assert filesystem_type(tmp_path) == int(shown.stdout, 16)
    assert remote_filesystem(tmp_path) is None  # a local disk: inotify sees every change


def test_a_flood_comes_as_the_roots(tmp_path: Path) -> None:
    async def scenario() -> None:
        hub = WatchHub()
        try:
            watch = await hub.watch([tmp_path], recursive=False).start()
            for i in range(MAX_PENDING + 50):
                (tmp_path / f"f{i}").touch()
            batch = await asyncio.wait_for(anext(watch.batches()), WAIT_S)
            assert batch == {tmp_path}
        finally:
            hub.close()

    run(scenario)


def test_a_folder_replaced_during_a_flood_is_watched_again(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()

    async def scenario() -> None:
        hub = WatchHub()
        try:
            watch = await hub.watch([tmp_path], recursive=True).start()
            # Before the loop reads anything: a queue fuller than one read (a flood: its
            # events go unread), then the subfolder replaced by another at the same path.
            for i in range(3000):
                (tmp_path / f"f{i}").touch()
            (tmp_path / "a").rmdir()
            (tmp_path / "a").mkdir()
            batch = await asyncio.wait_for(anext(watch.batches()), WAIT_S)
            assert batch == {tmp_path}
            (tmp_path / "a" / "new").write_text("x")
            await batch_with(watch, tmp_path / "a" / "new")
        finally:
            hub.close()

    run(scenario)


def test_polling_sees_what_inotify_would(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()

    async def scenario() -> None:
        told: list[str] = []
        hub = WatchHub(told.append, polling=True)
        try:
            watch = await hub.watch([tmp_path], recursive=True).start()
            assert hub.instances == 0 and set(hub.polled()) == {tmp_path, tmp_path / "old"}
            (tmp_path / "file").write_text("x")
            await batch_with(watch, tmp_path / "file", WAIT_S + POLL_S)
            (tmp_path / "new").mkdir()
            (tmp_path / "new" / "inner").write_text("x")
            # The new folder is polled from empty: what is in it is news.
            await batch_with(watch, tmp_path / "new" / "inner", WAIT_S + 2 * POLL_S)
            shutil.rmtree(tmp_path / "old")
            await batch_with(watch, tmp_path / "old", WAIT_S + POLL_S)
            assert tmp_path / "old" not in hub.polled()
            assert told == []  # polling asked for: nothing to warn about
        finally:
            hub.close()

    run(scenario)


LIMITED = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from toold.watching import WatchHub

    limit, value, first, second = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    Path("/proc/sys/user", limit).write_text(value)

    async def main():
        told = []
        hub = WatchHub(told.append)
        a = await hub.watch([first], recursive=False).start()
        b = await hub.watch([second], recursive=False).start()
        (second / "new").write_text("x")
        async with asyncio.timeout(10):
            async for batch in b.batches():
                if second / "new" in batch:
                    break
        await hub.watch([second], recursive=False).start()  # refused again: no second word
        polled = [str(p) for p in hub.polled()]
        print(json.dumps({"told": told, "polled": polled, "instances": hub.instances}))
        hub.close()

    asyncio.run(main())
    """
)


def in_own_limits(limit: str, value: int, first: Path, second: Path) -> dict[str, Any]:
    """Run the scenario in a user namespace whose ``limit`` is ``value``."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "-Ur", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here: {probe.stderr.decode().strip()}")
    done = subprocess.run(
        [
            "unshare",
            "-Ur",
            sys.executable,
            "-c",
            LIMITED,
            limit,
            str(value),
            str(first),
            str(second),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_watches_used_up_poll_the_rest_and_say_so_once(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    got = in_own_limits("max_inotify_watches", 1, first, second)
    assert got["instances"] == 1 and got["polled"] == [str(second)]
    told = got["told"]
    assert isinstance(told, list) and len(told) == 1, told
    assert "fs.inotify.max_user_watches" in told[0] and "sudo sysctl" in told[0]


def test_no_instance_left_polls_everything_and_says_so_once(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    got = in_own_limits("max_inotify_instances", 0, first, second)
    assert got["instances"] == 0 and sorted(got["polled"]) == [str(first), str(second)]
    told = got["told"]
    assert isinstance(told, list) and len(told) == 1, told
    assert "fs.inotify.max_user_instances" in told[0]
    assert "sudo sysctl fs.inotify.max_user_instances=" in told[0]
