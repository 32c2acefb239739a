"""Team registry, mailboxes and the manager's bookkeeping (the agent side is in tests/agents)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toold.team.mailbox import Mailboxes, new_message
from toold.team.manager import TeamManager
from toold.team.registry import TeamRegistry


def test_register_writes_the_spec_format(tmp_path: Path) -> None:
    registry = TeamRegistry(tmp_path / ".team.json", tmp_path / ".toold" / "team.lock")
    entry = registry.register("alice", "reviewer", "Be terse.", model="claude-x")
    assert entry == {
        "name": "alice",
        "role": "reviewer",
        "system_prompt": "Be terse.",
        "provider_config": {"model": "claude-x"},
    }
    data = json.loads((tmp_path / ".team.json").read_text())
    assert data == {"teammates": {"alice": entry}}
    assert registry.all() == [entry]


@pytest.mark.parametrize("name", ["", "a b", "../x", "é", "main"])
def test_register_refuses_bad_names(tmp_path: Path, name: str) -> None:
    registry = TeamRegistry(tmp_path / ".team.json", tmp_path / "lock")
    with pytest.raises(ValueError):
        registry.register(name, "role")
    assert not (tmp_path / ".team.json").exists()


def test_unknown_teammate(tmp_path: Path) -> None:
    registry = TeamRegistry(tmp_path / ".team.json", tmp_path / "lock")
    with pytest.raises(ValueError, match="Unknown teammate: bob"):
        registry.get("bob")


def test_mailbox_round_trip_and_torn_lines(tmp_path: Path) -> None:
    boxes = Mailboxes(tmp_path)
    first = new_message("main", "alice", "hello")
    assert len(first["id"]) == 12 and first["type"] == "request" and first["inReplyTo"] is None
    boxes.append(first)
    with boxes.path("alice").open("ab") as fh:
        fh.write(b'{"torn": \n')  # a corrupt complete line
        fh.write(b'{"id": "partial"')  # an unfinished last line
    messages, offset = boxes.read_from("alice", 0)
    assert messages == [first]
    # The unfinished line waits for its newline; a new reader starts before it too.
    assert offset == boxes.size("alice") < boxes.path("alice").stat().st_size
    with boxes.path("alice").open("ab") as fh:
        fh.write(b', "to": "alice"}\n')
    later, end = boxes.read_from("alice", offset)
    assert later == [{"id": "partial", "to": "alice"}]
    assert end == boxes.size("alice")


def _tear(boxes: Mailboxes, agent: str) -> bytes:
    """What a writer killed in the middle of a large append leaves: a line without its end."""
    torn = json.dumps(new_message("worker", agent, "x" * 10_000)).encode()[:5000]
    with boxes.path(agent).open("ab") as fh:
        fh.write(torn)
    return torn


def test_an_append_cuts_a_torn_tail(tmp_path: Path) -> None:
    boxes = Mailboxes(tmp_path)
    whole = new_message("worker", "main", "whole")
    boxes.append(whole)
    before = boxes.path("main").stat().st_size
    _tear(boxes, "main")
    start = boxes.size("main")
    assert start == before  # a new reader starts before the torn tail
    after = new_message("worker", "main", "after the crash")
    boxes.append(after)
    raw = boxes.path("main").read_bytes()
    assert [json.loads(line) for line in raw.splitlines()] == [whole, after]
    assert boxes.read_from("main", start) == ([after], len(raw))
    assert boxes.read_from("main", 0) == ([whole, after], len(raw))


def test_an_offset_into_a_torn_tail_is_moved_back(tmp_path: Path) -> None:
    """An offset inside an unfinished line (Mailboxes never hands one out) is made sane."""
    boxes = Mailboxes(tmp_path)
    whole = new_message("worker", "main", "whole")
    boxes.append(whole)
    cut = boxes.size("main")
    _tear(boxes, "main")
    inside = boxes.path("main").stat().st_size  # the end, torn tail included
    # Back to the end of the last whole line, where the next append writes.
    assert boxes.read_from("main", inside) == ([], cut)
    assert boxes.read_from("main", 10**9) == ([], cut)
    short = new_message("worker", "main", "short")
    boxes.append(short)
    assert boxes.read_from("main", cut) == ([short], boxes.size("main"))
    long = new_message("worker", "main", "y" * 10_000)
    boxes.append(long)
    # In the middle of a whole line: back to the start of that line.
    assert boxes.read_from("main", inside) == ([long], boxes.size("main"))
    assert boxes.read_from("main", 0)[0] == [whole, short, long]


def test_an_append_returns_after_the_whole_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    boxes = Mailboxes(tmp_path)
    real_write = os.write
    calls = []

    def short_write(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:1000]))

    message = new_message("worker", "main", "z" * 5000)
    with monkeypatch.context() as patch:
        patch.setattr(os, "write", short_write)
        boxes.append(message)
    assert len(calls) > 5
    assert boxes.read_from("main", 0)[0] == [message]


def test_a_failed_append_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boxes = Mailboxes(tmp_path)
    first = new_message("worker", "main", "first")
    boxes.append(first)
    before = boxes.path("main").read_bytes()
    real_write = os.write
    calls = []

    def disk_full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data[:100]))

    with monkeypatch.context() as patch:
        patch.setattr(os, "write", disk_full)
        with pytest.raises(OSError):
            boxes.append(new_message("worker", "main", "lost"))
    assert boxes.path("main").read_bytes() == before
    last = new_message("worker", "main", "last")
    boxes.append(last)
    assert boxes.read_from("main", 0)[0] == [first, last]


def test_appends_from_many_processes_stay_whole_lines(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from toold.team.mailbox import Mailboxes, new_message
        boxes = Mailboxes(Path({str(tmp_path)!r}))
        for i in range(200):
            boxes.append(new_message(sys.argv[1], "main", "x" * 5000 + str(i)))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, f"w{n}"]) for n in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    lines = Mailboxes(tmp_path).path("main").read_bytes().splitlines()
    assert len(lines) == 800
    senders = [json.loads(line)["from"] for line in lines]
    assert sorted(set(senders)) == ["w0", "w1", "w2", "w3"]


def _manager(tmp_path: Path) -> TeamManager:
    return TeamManager(tmp_path, tmp_path / ".toold", agents=None, reply_timeout=1)


def test_spawn_and_send_without_a_provider(tmp_path: Path) -> None:
    team = _manager(tmp_path)
    team.register("alice", "reviewer")

    async def scenario() -> tuple[str, str]:
        spawned = await team.spawn("alice")
        sent = await team.send("alice", "hi")
        await team.close()
        return spawned, sent

    spawned, sent = asyncio.run(scenario())
    assert spawned == "Team spawning unavailable for alice: provider is not configured."
    assert sent == "Teammate alice is not running. Start it with team_spawn first."
    assert team.list() == [
        {
            "name": "alice",
            "role": "reviewer",
            "system_prompt": "",
            "provider_config": {},
            "running": False,
        }
    ]
    with pytest.raises(ValueError, match="Unknown teammate: bob"):
        asyncio.run(team.send("bob", "hi"))


def test_running_is_seen_across_processes(tmp_path: Path) -> None:
    team = _manager(tmp_path)
    team.register("alice", "reviewer")
    lock = tmp_path / ".toold" / "team" / "alice.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()",
            str(lock),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert team.is_running("alice")
        assert asyncio.run(team.spawn("alice")) == "Teammate alice is already running."
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=10)
        holder.stdout.close()
    assert not team.is_running("alice")


def test_a_sessions_teammates_end_with_it_and_answer_what_they_had_not(tmp_path: Path) -> None:
    """end_session stops the teammates that session spawned, no other; a request one had
    not answered gets a ``stopped`` reply (its asker waits no longer); mailboxes stay."""
    team = TeamManager(tmp_path, tmp_path / ".toold", agents=object(), reply_timeout=5)
    for name in ("alice", "bob"):
        team.register(name, "dev")
    spawning = [1]
    team.session_of = lambda: spawning[0]
    request = new_message("main", "alice", "review please")

    async def scenario() -> tuple[str, ...]:
        await team.spawn("alice")
        spawning[0] = 2
        await team.spawn("bob")
        await asyncio.sleep(0.05)  # both wait on their mailboxes
        team.mail.append(request)  # ... and alice has not read it when her session ends
        stopped = await team.end_session(1)
        assert (team.is_running("alice"), team.is_running("bob")) == (False, True)
        assert await team.end_session(1) == ()
        await team.close()
        return stopped

    assert asyncio.run(scenario()) == ("alice",)
    [reply] = team.mail.read_from("main", 0)[0]
    assert (reply["from"], reply["type"], reply["inReplyTo"]) == ("alice", "stopped", request["id"])
    assert reply["content"] == (
        "Teammate alice stopped before answering: the session that started it ended."
    )
    assert team.mail.read_from("alice", 0)[0] == [request]
    assert not team.is_running("bob")


def test_an_ending_session_stops_no_teammate_another_session_spawned_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """end_session(1) stops alice, then bob; while alice stops, bob (session 1's) ends by
    himself and session 2 spawns him again: that bob is session 2's and keeps running."""
    team = TeamManager(tmp_path, tmp_path / ".toold", agents=object(), reply_timeout=5)
    for name in ("alice", "bob"):
        team.register(name, "dev")
    spawning = [1]
    team.session_of = lambda: spawning[0]
    stop = team._stop

    async def stop_taking_its_time(name: str, why: str) -> None:
        await stop(name, why)
        if name == "alice":  # the window: bob shuts down and session 2 spawns him
            team.mail.append(new_message("main", "bob", "", "shutdown"))
            for _ in range(500):
                if not team.is_running("bob"):
                    break
                await asyncio.sleep(0.01)
            spawning[0] = 2
            assert (await team.spawn("bob")).startswith("Spawned")

    monkeypatch.setattr(team, "_stop", stop_taking_its_time)

    async def scenario() -> tuple[tuple[str, ...], bool]:
        await team.spawn("alice")
        await team.spawn("bob")
        stopped = await team.end_session(1)
        running = team.is_running("bob")
        await team.close()
        return stopped, running

    stopped, running = asyncio.run(scenario())
    assert running, "session 1's end stopped the bob session 2 spawned"
    assert stopped == ("alice",)
