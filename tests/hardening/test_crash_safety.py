"""Crash safety: SIGKILL at random points while toold writes; nothing parses half-written.

Each round starts a daemon on the same workspace, pipelines a burst of writes — files
(write_file, new ones and overwrites, 1 KiB to 256 KiB), tasks (task_create, so
``.tasks.json``) and TODOs (todo_write, so ``.toold/todos.json``) — and SIGKILLs it
after a seeded random delay. What it answered before dying is acknowledged. After
every round each file must parse (files hold a self-checking payload), and every
acknowledged write must be there. The next round's daemon must load the state too.
Mailboxes get the same treatment in a child process appending through
``toold.team.mailbox.Mailboxes``.

Rounds: 30 per store (``TOOLD_FULL_HARDENING=1``: 200), seeded, so CI is reproducible.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient
from tests.hardening.support import scale, start_daemon

ROUNDS = scale(30, 200)
FILES_PER_ROUND = 24
TASKS_PER_ROUND = 16
TODOS_PER_ROUND = 16
OVERWRITTEN = 8  # files f0..f7 are overwritten every round; the others are new
KILL_WITHIN = 12  # each round's daemon is killed after 1 to 11 of its 56 answers


def payload(name: str, version: int, size: int) -> str:
    """A file body that proves itself whole: a header with the length and a digest."""
    body = random.Random(f"{name}:{version}").randbytes(size // 2).hex()
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"{name} v{version} {len(body)} {digest}\n{body}"


def parse_payload(text: str) -> tuple[str, int]:
    """(name, version) of a whole payload; AssertionError for anything torn."""
    header, _, body = text.partition("\n")
    name, version, size, digest = header.split(" ")
    assert int(size) == len(body), f"{name}: torn ({len(body)} of {size} characters)"
    assert hashlib.sha256(body.encode()).hexdigest()[:16] == digest, f"{name}: corrupt"
    return name, int(version.removeprefix("v"))


@dataclass
class Acked:
    """Everything some daemon answered, over all rounds."""

    files: dict[str, int] = field(default_factory=dict)  # path -> newest acked version
    tasks: dict[str, str] = field(default_factory=dict)  # id -> title
    todos: dict[str, str] = field(default_factory=dict)  # id -> text


def plan_round(n: int, rng: random.Random) -> list[tuple[str, dict[str, Any], Any]]:
    """The round's writes, interleaved: (tool, arguments, what an answer acknowledges)."""
    writes: list[tuple[str, dict[str, Any], Any]] = []
    for i in range(FILES_PER_ROUND):
        name = f"f{i}" if i < OVERWRITTEN else f"r{n}-{i}"
        size = rng.choice((1024, 16_384, 65_536, 262_144))
        args = {"file_path": f"files/{name}.txt", "content": payload(name, n, size)}
        writes.append(("write_file", args, ("file", f"files/{name}.txt", n)))
    for i in range(TASKS_PER_ROUND):
        title = f"task {n}-{i}"
        writes.append(("task_create", {"title": title, "description": "x" * 2000}, ("task", title)))
    for i in range(TODOS_PER_ROUND):
        text = f"todo {n}-{i}"
        writes.append(("todo_write", {"action": "add", "task": text}, ("todo", text)))
    rng.shuffle(writes)
    return writes


def acknowledge(acked: Acked, what: Any, content: Any) -> None:
    kind = what[0]
    if kind == "file":
        assert str(content).startswith("Wrote"), content
        acked.files[what[1]] = max(acked.files.get(what[1], -1), what[2])
    elif kind == "task":
        task = content if isinstance(content, dict) else json.loads(content)
        assert task["title"] == what[1], content
        acked.tasks[task["id"]] = what[1]
    else:
        match = re.match(r"Added TODO (t\d+) \[\w+\]: (.*)", str(content))
        assert match and match.group(2) == what[1], content
        acked.todos[match.group(1)] = what[1]


def run_round(ws: Path, n: int, rng: random.Random, acked: Acked) -> int:
    """One daemon life: check the state it loads, write, SIGKILL; returns the answers.
    A private daemon (``--no-daemon``): the process killed is the one that writes
    (tests/engine/test_shared_engine.py kills an engine mid-write)."""
    client = start_daemon(ws, "--no-daemon")
    try:
        check_through_daemon(client, acked)  # also waits until the workspace is bound
        writes = plan_round(n, rng)
        ids = {f"w{n}-{k}": what for k, (_, _, what) in enumerate(writes)}

        def send() -> None:
            try:
                for k, (tool, args, _) in enumerate(writes):
                    params = {"name": tool, "arguments": args, "origin": "user"}
                    client.request("tools/call", params, msg_id=f"w{n}-{k}")
            except (BrokenPipeError, ValueError):
                pass  # killed while sending

        # The point of death: right after a random number of answers, so that it lands
        # in the middle of the burst however fast this machine is (a timer did not,
        # under load), and wherever the daemon then is in the writes that follow.
        target = rng.randrange(1, KILL_WITHIN)
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answers = 0
        while (msg := client.messages.get(timeout=30)) is not None:
            if msg.get("id") in ids:
                assert not msg["result"]["isError"], msg
                acknowledge(acked, ids[msg["id"]], msg["result"]["content"])
                answers += 1
                if answers == target:
                    client.proc.kill()
        sender.join(timeout=30)
        client.proc.wait(timeout=10)
        return answers
    finally:
        client.close()


def check_through_daemon(client: WireClient, acked: Acked) -> None:
    """A fresh daemon sees every acknowledged task and TODO."""
    tasks = {t["id"]: t["title"] for t in client.call("tasks/list", {})["tasks"]}
    todos = {t["id"]: t["task"] for t in client.call("todos/list", {})["todos"]}
    assert acked.tasks.items() <= tasks.items()
    assert acked.todos.items() <= todos.items()


def check_on_disk(ws: Path, acked: Acked) -> None:
    """Every store parses and holds every acknowledged write.

    A kill between a temp file's creation and its rename leaves ``.name.XXXX.tmp``
    behind (never the real file half-written); those are not checked here.
    """
    for path in (ws / "files").glob("*.txt"):
        name, version = parse_payload(path.read_text(encoding="utf-8"))
        rel = f"files/{path.name}"
        assert name == path.stem and version >= acked.files.get(rel, -1), (rel, version)
    for rel in acked.files:
        assert (ws / rel).is_file(), f"acknowledged {rel} is gone"
    # A kill before the first task or TODO was written leaves no file yet: then nothing
    # of that kind was acknowledged either, which the comparisons below check.
    tasks_file, todos_file = ws / ".tasks.json", ws / ".toold" / "todos.json"
    data = json.loads(tasks_file.read_text(encoding="utf-8")) if tasks_file.exists() else {}
    stored = {key: task["title"] for key, task in data.get("tasks", {}).items()}
    assert acked.tasks.items() <= stored.items()
    if not todos_file.exists():
        assert not acked.todos, "acknowledged TODOs but no todos.json"
        return
    snapshot = json.loads(todos_file.read_text(encoding="utf-8"))
    todos = {item["id"]: item["task"] for item in snapshot["items"]}
    assert acked.todos.items() <= todos.items()
    assert int(snapshot["next"]) > max((int(i[1:]) for i in todos), default=0)


@pytest.mark.timeout(300)  # 30 daemon lives; about 40 s on an idle 2-core machine
def test_sigkill_during_file_task_and_todo_writes_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    rng = random.Random(20_260_701)
    acked = Acked()
    per_round = FILES_PER_ROUND + TASKS_PER_ROUND + TODOS_PER_ROUND
    answered = []
    for n in range(ROUNDS):
        answered.append(run_round(ws, n, rng, acked))
        check_on_disk(ws, acked)
    # The kills landed in the middle of the bursts, not only before or after them.
    assert sum(0 < a < per_round for a in answered) >= ROUNDS // 3, str(answered)
    client = start_daemon(ws)
    try:
        check_through_daemon(client, acked)
    finally:
        assert client.close() == 0


# --------------------------------------------------------------------------- mailboxes

APPENDER = """
import sys
from pathlib import Path
from toold.team.mailbox import Mailboxes, new_message

boxes, n, seed = Mailboxes(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3])
import random
rng = random.Random(seed)
for i in range(100_000):
    size = rng.choice((100, 4_000, 70_000, 300_000))
    message = new_message("worker", "main", f"{n}-{i}:" + "m" * size)
    boxes.append(message)
    print(message["id"], flush=True)
"""


def test_sigkill_during_mailbox_appends_loses_nothing_acknowledged(tmp_path: Path) -> None:
    pytest.importorskip("toold.team.mailbox")
    from toold.team.mailbox import Mailboxes

    folder = tmp_path / "mailboxes"
    rng = random.Random(20_260_702)
    acked: set[str] = set()
    found: set[str] = set()
    offset = 0  # read on from here, as the team manager does
    for n in range(ROUNDS):
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                APPENDER,
                os.fspath(folder),
                str(n),
                str(rng.randrange(1 << 30)),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        first = child.stdout.readline()  # the child is up and appending
        assert first, "the appender died at start"
        acked.add(first.strip())
        time.sleep(rng.uniform(0.0, 0.3))  # the random point of death
        child.kill()
        out, _ = child.communicate(timeout=10)
        acked.update(line for line in out.split("\n") if line)
        messages, offset = Mailboxes(folder).read_from("main", offset)
        found.update(m["id"] for m in messages)
        assert acked <= found, f"round {n}: lost {sorted(acked - found)[:5]}"
    # Every line but a torn last one (never acknowledged) is a whole message.
    with (folder / "main.jsonl").open("rb") as fh:
        lines = iter(fh)
        previous = next(lines)
        for line in lines:
            json.loads(previous)
            previous = line
        if previous.endswith(b"\n"):
            json.loads(previous)


def test_an_append_after_a_torn_line_is_still_readable(tmp_path: Path) -> None:
    """What a SIGKILL in the middle of a large append leaves, then the next append."""
    pytest.importorskip("toold.team.mailbox")
    from toold.team.mailbox import Mailboxes, new_message

    boxes = Mailboxes(tmp_path / "mailboxes")
    boxes.append(new_message("worker", "main", "whole"))
    torn = json.dumps(new_message("worker", "main", "x" * 10_000)).encode()[:5000]
    with boxes.path("main").open("ab") as fh:
        fh.write(torn)  # a short write: the process died between two pages
    after = new_message("worker", "main", "acknowledged after the crash")
    boxes.append(after)
    messages, _ = boxes.read_from("main", 0)
    assert after["id"] in {m["id"] for m in messages}
