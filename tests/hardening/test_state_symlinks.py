"""toold's own state through symlinks and hostile names: refused, nothing outside touched.

Over the real daemon (``toold serve`` on stdio): every state file in turn is replaced by
a symlink to a canary outside (``.toold/todos.json``, ``.tasks.json``, the tasks backup
and lock, ``.team.json``, the team lock, the jobs lock, a job's record and log), the
whole ``.toold`` is linked to another workspace's ``.toold``, ``.toold/jobs`` to an
outside folder, and skills are linked out (``SKILL.md -> canary``, a skill folder, the
skills folder). Each call that touches one must fail with an error naming the file,
and a snapshot of everything outside the workspace must come out unchanged. Names read
from files (``.team.json``, job records, mailbox messages) are checked where read.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient
from tests.hardening.support import start_daemon
from toold.jobs.manager import BackgroundManager
from toold.jobs.records import Outcome
from toold.team.mailbox import Mailboxes, new_message


@dataclass
class World:
    root: Path
    ws: Path
    outside: Path
    other: Path
    """Another workspace, with its own ``.toold``."""
    token: str

    @property
    def canary(self) -> Path:
        return self.outside / "canary.txt"

    def link(self, rel: str, target: Path) -> Path:
        path = self.ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
        return path


def snapshot(world: World) -> dict[str, tuple[Any, ...]]:
    """Everything outside the workspace: type, size, mtime, links, content hash."""
    seen: dict[str, tuple[Any, ...]] = {}
    for folder in (world.outside, world.other):
        for top, dirs, files in os.walk(folder, followlinks=False):
            for name in dirs + files:
                path = os.path.join(top, name)
                info = os.lstat(path)
                extra: Any = None
                if stat.S_ISLNK(info.st_mode):
                    extra = os.readlink(path)
                elif stat.S_ISREG(info.st_mode):
                    extra = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                seen[path] = (info.st_mode, info.st_size, info.st_mtime_ns, extra)
    return seen


@pytest.fixture
def world(tmp_path: Path) -> World:
    root = tmp_path.resolve()
    token = secrets.token_hex(8)
    ws, outside, other = root / "ws", root / "outside", root / "other"
    ws.mkdir()
    outside.mkdir()
    (outside / "canary.txt").write_text(f"CANARY-{token}\n", encoding="utf-8")
    notes = outside / "notes"
    notes.mkdir()
    (notes / "SKILL.md").write_text(f"# Notes\nCANARY-{token}\n", encoding="utf-8")
    (other / ".toold" / "jobs").mkdir(parents=True)
    (other / ".toold" / "todos.json").write_text('{"next": 1, "items": []}', encoding="utf-8")
    return World(root, ws, outside, other, token)


@pytest.fixture
def daemon(world: World) -> Iterator[Any]:
    clients: list[WireClient] = []

    def start() -> WireClient:
        client = start_daemon(world.ws)
        clients.append(client)
        return client

    yield start
    for client in clients:
        assert client.close() == 0, client.stderr()


def call(client: WireClient, tool: str, **arguments: Any) -> dict[str, Any]:
    """tools/call as a person would make it (origin "user")."""
    params = {"name": tool, "arguments": arguments, "origin": "user"}
    result: dict[str, Any] = client.call("tools/call", params)
    return result


def refused(result: dict[str, Any], world: World, names: str) -> None:
    """An error result naming ``names`` and showing nothing of the outside."""
    text = json.dumps(result)
    assert result["isError"] is True, result
    assert names in text, result
    assert world.token not in text, result


# Each case: the state path replaced by a link to the canary, and the call that uses it.
STATE_FILES: list[tuple[str, str, dict[str, Any]]] = [
    (".toold/todos.json", "todo_write", {"action": "add", "task": "x"}),
    (".tasks.json", "task_create", {"title": "x"}),
    (".toold/tasks.lock", "task_create", {"title": "x"}),
    (".team.json", "team_register", {"name": "tm", "role": "r"}),
    (".toold/team/registry.lock", "team_register", {"name": "tm", "role": "r"}),
    (".toold/jobs/.lock", "background_run", {"command": "echo X", "task_id": "J1"}),
    (".toold/jobs/J1.log", "background_run", {"command": "echo X", "task_id": "J1"}),
    (".toold/jobs/J1.json", "background_run", {"command": "echo X", "task_id": "J1"}),
]


@pytest.mark.parametrize(("rel", "tool", "args"), STATE_FILES, ids=[c[0] for c in STATE_FILES])
def test_a_symlinked_state_file_is_refused_by_name(
    world: World, daemon: Any, rel: str, tool: str, args: dict[str, Any]
) -> None:
    world.link(rel, world.canary)
    before = snapshot(world)
    client = daemon()
    refused(call(client, tool, **args), world, rel.rsplit("/", 1)[-1])
    if rel == ".team.json":
        refused(call(client, "team_list"), world, ".team.json")
    if rel == ".tasks.json":
        refused(call(client, "task_list"), world, ".tasks.json")
    assert snapshot(world) == before
    assert (world.ws / rel).is_symlink()  # not replaced behind the user's back either


def test_a_symlinked_tasks_backup_is_refused(world: World, daemon: Any) -> None:
    client = daemon()
    assert call(client, "task_create", title="first")["isError"] is False
    world.link(".toold/tasks.json.bak", world.canary)
    before = snapshot(world)
    refused(call(client, "task_create", title="second"), world, "tasks.json.bak")
    assert snapshot(world) == before


def test_toold_linked_to_another_workspaces_state_is_refused(world: World, daemon: Any) -> None:
    world.link(".toold", world.other / ".toold")
    before = snapshot(world)
    client = daemon()
    for tool, args in (
        ("todo_write", {"action": "add", "task": "x"}),
        ("task_create", {"title": "x"}),
        ("background_run", {"command": "echo X", "task_id": "J2"}),
        ("team_register", {"name": "tm", "role": "r"}),
    ):
        refused(call(client, tool, **args), world, ".toold")
    assert snapshot(world) == before
    assert client.proc.poll() is None


def test_a_symlinked_jobs_folder_is_refused(world: World, daemon: Any) -> None:
    world.link(".toold/jobs", world.outside)
    before = snapshot(world)
    client = daemon()
    refused(call(client, "background_run", command="echo X", task_id="J3"), world, "jobs")
    assert snapshot(world) == before


def test_hostile_teammate_names_in_team_json_are_refused(world: World, daemon: Any) -> None:
    evil = "../../outside/tm"
    entry = {"name": evil, "role": "r", "system_prompt": "", "provider_config": {}}
    (world.ws / ".team.json").write_text(json.dumps({"teammates": {evil: entry}}))
    before = snapshot(world)
    client = daemon()
    for tool, args in (
        ("team_list", {}),
        ("team_spawn", {"name": evil}),
        ("team_send", {"to_agent": evil, "content": "hi"}),
    ):
        refused(call(client, tool, **args), world, "is not a valid name")
    assert snapshot(world) == before
    assert not list(world.root.glob("**/tm*")), "a file was created for the hostile name"


@pytest.mark.parametrize("task_id", ["../x", "..", ".hidden", "a/b", "x" * 200])
def test_background_run_refuses_a_hostile_task_id(world: World, daemon: Any, task_id: str) -> None:
    before = snapshot(world)
    client = daemon()
    refused(call(client, "background_run", command="echo X", task_id=task_id), world, "task_id")
    assert snapshot(world) == before


def test_skills_behind_symlinks_are_refused_and_not_listed(world: World, daemon: Any) -> None:
    skills = world.ws / ".toold" / "skills"
    (skills / "notes").mkdir(parents=True)
    (skills / "notes" / "SKILL.md").symlink_to(world.canary)  # SKILL.md -> outside
    world.link(".toold/skills/linked", world.outside / "notes")  # a skill folder -> outside
    (skills / "good").mkdir()
    (skills / "good" / "SKILL.md").write_text("# Good\nFine.\n", encoding="utf-8")
    client = daemon()
    refused(call(client, "load_skill", skill_name="notes"), world, "notes/SKILL.md")
    refused(call(client, "load_skill", skill_name="linked"), world, "skills/linked")
    assert "Fine." in call(client, "load_skill", skill_name="good")["content"]
    listed = client.call("skills/list", {})
    names = {s["name"] for s in listed["skills"]}
    assert "good" in names and not {"notes", "linked"} & names
    assert world.token not in json.dumps(listed)


def test_a_symlinked_skills_folder_is_refused(world: World, daemon: Any) -> None:
    world.link(".toold/skills", world.outside)
    client = daemon()
    refused(call(client, "load_skill", skill_name="notes"), world, ".toold/skills")
    listed = client.call("skills/list", {})
    assert "notes" not in {s["name"] for s in listed["skills"]}
    assert world.token not in json.dumps(listed)


# -- unit level: what the wire cannot reach without a model provider --------------------


def test_a_job_record_naming_a_hostile_id_is_skipped(world: World) -> None:
    jobs = world.ws / ".toold" / "jobs"
    jobs.mkdir(parents=True)
    record = {"job_id": "../../outside/evil", "command": "x", "timeout": 1, "status": "done"}
    (jobs / "evil.json").write_text(json.dumps(record))
    (jobs / "..evil.json").write_text(json.dumps(record))

    async def execute(*_: Any) -> Outcome:
        raise AssertionError("nothing runs")

    manager = BackgroundManager(jobs, execute)
    assert manager.list() == []
    assert sorted(os.listdir(world.outside)) == ["canary.txt", "notes"]


def test_mailboxes_refuse_links_and_hostile_names(world: World) -> None:
    folder = world.ws / ".toold" / "mailboxes"
    folder.mkdir(parents=True)
    (folder / "tm.jsonl").symlink_to(world.canary)
    mail = Mailboxes(folder)
    before = snapshot(world)
    with pytest.raises(PermissionError, match=r"tm\.jsonl"):
        mail.append(new_message("main", "tm", "hi"))
    with pytest.raises(PermissionError, match=r"tm\.jsonl"):
        mail.read_from("tm", 0)
    # A reply goes to the message's "from", read from a file: checked there.
    with pytest.raises(ValueError, match="Invalid teammate name"):
        mail.append(new_message("tm", "../../outside/x", "reply"))
    assert snapshot(world) == before
    # A hard link to a file outside is not appended to either.
    (folder / "tm.jsonl").unlink()
    os.link(world.canary, folder / "tm.jsonl")
    with pytest.raises(PermissionError, match="hard links"):
        mail.append(new_message("main", "tm", "hi"))
    assert world.canary.read_text(encoding="utf-8") == f"CANARY-{world.token}\n"
