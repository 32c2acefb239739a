""".tasks.json: BareAgent's format, validation and errors; locking, backups, corrupt files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from toold.planning.tasks import TaskManager, TaskStoreError
from toold_protocol import METHODS, names

from .conftest import Call, ToolsWith

ID = re.compile(r"^[A-Za-z0-9]{8}$")
FIELDS = {"id", "title", "description", "status", "depends_on", "created_at", "updated_at"}
INVALID_STATUS = "Invalid task status: {}. Expected one of: done, failed, in_progress, pending"


@pytest.fixture
def changes() -> list[list[dict[str, Any]]]:
    return []


def manager(workspace: Path, changes: list[Any] | None = None) -> TaskManager:
    """A TaskManager wired like the daemon's (lock and backup under .toold)."""

    def on_change(snapshot: list[dict[str, Any]]) -> None:
        METHODS[names.TASKS_CHANGED].params.model_validate({"tasks": snapshot})
        if changes is not None:
            changes.append(snapshot)

    tasks = TaskManager(
        workspace / ".tasks.json",
        lock_path=workspace / ".toold" / "tasks.lock",
        backup_path=workspace / ".toold" / "tasks.json.bak",
        on_change=on_change,
    )
    tasks.load()
    return tasks


@pytest.fixture
def tasks(workspace: Path, changes: list[Any]) -> TaskManager:
    return manager(workspace, changes)


@pytest.fixture
def task(tools_with: ToolsWith, tasks: TaskManager) -> Call:
    """Call the task tools bound to ``tasks``, as the daemon does."""
    return tools_with(tasks=tasks)


def on_disk(workspace: Path) -> dict[str, Any]:
    return json.loads((workspace / ".tasks.json").read_text(encoding="utf-8"))["tasks"]


def write_file(workspace: Path, tasks: dict[str, dict[str, Any]]) -> bytes:
    data = json.dumps({"tasks": tasks}, indent=2).encode()
    (workspace / ".tasks.json").write_bytes(data)
    return data


def crafted(task_id: str, *deps: str, status: str = "pending") -> dict[str, Any]:
    stamp = "2024-01-01T00:00:00+00:00"
    return {
        "id": task_id,
        "title": f"task {task_id}",
        "description": "",
        "status": status,
        "depends_on": list(deps),
        "created_at": stamp,
        "updated_at": stamp,
    }


# -- create ----------------------------------------------------------------------------


def test_create_returns_the_spec_task_and_writes_the_file(task: Any, workspace: Path) -> None:
    before = datetime.now(UTC)
    created = task("task_create", title="  Write docs ", description=" the README ")
    assert set(created) == FIELDS
    assert ID.match(created["id"])
    assert created["title"] == "Write docs"
    assert created["description"] == "the README"
    assert created["status"] == "pending"
    assert created["depends_on"] == []
    stamp = datetime.fromisoformat(created["created_at"])
    assert stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= datetime.now(UTC)
    assert created["updated_at"] == created["created_at"]

    text = (workspace / ".tasks.json").read_text(encoding="utf-8")
    assert text.startswith('{\n  "tasks": {\n    "' + created["id"] + '": {\n      "id"')
    assert on_disk(workspace) == {created["id"]: created}


def test_file_is_exactly_json_with_indent_2(
    tasks: TaskManager, workspace: Path, changes: list[Any]
) -> None:
    """Written incrementally, yet byte for byte what json.dumps(indent=2) gives."""
    outside = {
        **crafted("AAAAAAAA"),
        "title": 'naïve \u2028 "quoted" 漢字',
        "extra": {"k": [1, None]},
    }
    write_file(workspace, {"AAAAAAAA": outside, "BBBBBBBB": crafted("BBBBBBBB", "AAAAAAAA")})
    c = tasks.create("über", depends_on=["AAAAAAAA"])["id"]
    tasks.update("AAAAAAAA", status="done")
    tasks.update(c, title="changed")
    text = (workspace / ".tasks.json").read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"
    assert json.loads(text)["tasks"]["AAAAAAAA"]["extra"] == {"k": [1, None]}  # kept as is
    assert len(changes) == 3  # announced without the unknown key
    assert "extra" not in changes[-1][0]


def test_ids_are_random_and_distinct(tasks: TaskManager) -> None:
    ids = {tasks.create(f"t{i}")["id"] for i in range(40)}
    assert len(ids) == 40
    assert all(ID.match(i) for i in ids)


def test_depends_on_is_stripped_deduplicated_and_checked(task: Any, workspace: Path) -> None:
    a = task("task_create", title="a")["id"]
    b = task("task_create", title="b", depends_on=[f" {a} ", a, a + "\t"])
    assert b["depends_on"] == [a]
    assert on_disk(workspace)[b["id"]]["depends_on"] == [a]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"title": "   "}, "title must not be empty"),
        ({"title": "x", "depends_on": ["  "]}, "depends_on entries must not be empty"),
        ({"title": "x", "depends_on": ["nope1234"]}, "Unknown dependency task id: nope1234"),
    ],
)
def test_create_errors_write_nothing(
    task: Call, workspace: Path, changes: list[Any], args: dict[str, Any], message: str
) -> None:
    first = task("task_create", title="first")
    data = (workspace / ".tasks.json").read_bytes()
    with task.fails(ValueError) as caught:
        task("task_create", **args)
    assert str(caught.value) == message
    assert (workspace / ".tasks.json").read_bytes() == data
    assert len(changes) == 1
    assert task("task_list") == [first]


def test_cycles_are_refused(tasks: TaskManager, workspace: Path) -> None:
    # Only an outside edit can make a cycle; toold refuses to build on it.
    cycle = {
        "AAAAAAAA": crafted("AAAAAAAA", "BBBBBBBB"),
        "BBBBBBBB": crafted("BBBBBBBB", "AAAAAAAA"),
    }
    data = write_file(workspace, cycle)
    with pytest.raises(ValueError, match=r"^Cyclic task dependency detected at: AAAAAAAA$"):
        tasks.create("c", depends_on=["AAAAAAAA"])
    assert (workspace / ".tasks.json").read_bytes() == data
    # A task outside the cycle is still fine.
    assert tasks.create("free")["depends_on"] == []


def test_a_long_dependency_chain_is_fine(tasks: TaskManager, workspace: Path) -> None:
    chain = {
        f"T{i:07d}": crafted(f"T{i:07d}", *([f"T{i - 1:07d}"] if i else [])) for i in range(3000)
    }
    write_file(workspace, chain)
    assert tasks.create("end", depends_on=["T0002999"])["depends_on"] == ["T0002999"]


# -- ready ---------------------------------------------------------------------------------


def test_ready_means_pending_with_every_dependency_done(tasks: TaskManager) -> None:
    a = tasks.create("a")["id"]
    b = tasks.create("b")["id"]
    c = tasks.create("c", depends_on=[a, b])["id"]

    def ready() -> dict[str, bool]:
        return {t["id"]: t["ready"] for t in tasks.snapshot()}

    assert ready() == {a: True, b: True, c: False}
    tasks.update(a, status="done")
    assert ready() == {a: False, b: True, c: False}
    tasks.update(b, status="done")
    assert ready() == {a: False, b: False, c: True}
    assert [t["id"] for t in tasks.ready_tasks()] == [c]
    tasks.update(c, status="in_progress")
    assert ready()[c] is False
    tasks.update(b, status="failed")
    tasks.update(c, status="pending")
    assert ready()[c] is False


# -- update, get, list -------------------------------------------------------------------------


def test_update_status_and_title(task: Any, workspace: Path) -> None:
    created = task("task_create", title="old")
    updated = task("task_update", task_id=created["id"], status="in_progress", title=" new ")
    assert updated["status"] == "in_progress"
    assert updated["title"] == "new"
    assert updated["created_at"] == created["created_at"]
    assert updated["updated_at"] > created["updated_at"]
    assert task("task_get", task_id=created["id"]) == updated
    assert on_disk(workspace)[created["id"]] == updated


def test_update_that_changes_nothing_writes_nothing(task: Any, changes: list[Any]) -> None:
    created = task("task_create", title="same")
    assert task("task_update", task_id=created["id"], status="pending") == created
    assert task("task_update", task_id=created["id"], title=" same ") == created
    assert len(changes) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "status or title is required"),
        ({"task_id": "nope1234", "status": "done"}, "Unknown task id: nope1234"),
        ({"task_id": "nope1234", "status": "blocked"}, "Unknown task id: nope1234"),
        ({"status": "blocked"}, INVALID_STATUS.format("blocked")),
        ({"title": "  "}, "title must not be empty"),
        ({"status": "done", "title": ""}, "title must not be empty"),
    ],
)
def test_update_errors_write_nothing(
    task: Call, workspace: Path, changes: list[Any], args: dict[str, Any], message: str
) -> None:
    created = task("task_create", title="t")
    data = (workspace / ".tasks.json").read_bytes()
    with task.fails(ValueError) as caught:
        task("task_update", **{"task_id": created["id"], **args})
    assert str(caught.value) == message
    assert (workspace / ".tasks.json").read_bytes() == data
    assert len(changes) == 1
    assert task("task_get", task_id=created["id"]) == created


def test_get_and_list(task: Any) -> None:
    a = task("task_create", title="a")
    b = task("task_create", title="b")
    task("task_update", task_id=b["id"], status="failed")
    assert task("task_get", task_id=f" {a['id']} ") == a
    with task.fails(ValueError, match=r"^Unknown task id: zzzzzzzz$"):
        task("task_get", task_id="zzzzzzzz")
    assert [t["title"] for t in task("task_list")] == ["a", "b"]
    assert [t["title"] for t in task("task_list", status="failed")] == ["b"]
    assert task("task_list", status="done") == []
    with task.fails(ValueError) as caught:
        task("task_list", status="open")
    assert str(caught.value) == INVALID_STATUS.format("open")


def test_results_are_copies(tasks: TaskManager) -> None:
    a = tasks.create("a")["id"]
    b = tasks.create("b", depends_on=[a])
    b["depends_on"].append("junk")
    tasks.get(b["id"])["depends_on"].append("junk")
    assert tasks.get(b["id"])["depends_on"] == [a]


# -- the file: other writers, corruption, backups, failures ------------------------------------


def test_every_change_is_announced_with_ready(tasks: TaskManager, changes: list[Any]) -> None:
    a = tasks.create("a")
    tasks.update(a["id"], status="done")
    assert [[(t["status"], t["ready"]) for t in snap] for snap in changes] == [
        [("pending", True)],
        [("done", False)],
    ]


def test_outside_edits_are_announced_once(
    tasks: TaskManager, workspace: Path, changes: list[Any]
) -> None:
    tasks.create("mine")
    assert tasks.reload() is False  # our own write, seen by the watcher: nothing new
    data = on_disk(workspace)
    data["EEEEEEEE"] = crafted("EEEEEEEE")
    write_file(workspace, data)
    tasks.list()  # a read in between must not swallow the announcement
    assert tasks.reload() is True
    assert [t["title"] for t in changes[-1]] == ["mine", "task EEEEEEEE"]
    assert tasks.reload() is False
    assert len(changes) == 2


def test_two_managers_on_one_file_lose_nothing(workspace: Path) -> None:
    """Two daemons' stores interleaving writes, each from many threads."""
    first, second = manager(workspace), manager(workspace)

    def burst(store: TaskManager, tag: str) -> None:
        for i in range(25):
            store.create(f"{tag}{i}")

    threads = [
        threading.Thread(target=burst, args=(store, f"{tag}{n}-"))
        for n in range(2)
        for store, tag in ((first, "a"), (second, "b"))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(on_disk(workspace)) == 100
    assert len(first.list()) == len(second.list()) == 100


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"{not json", r"\.tasks\.json is not valid JSON"),
        (b'{"tasks": []}', r'\.tasks\.json must hold \{"tasks"'),
        (b'{"tasks": {"x": {"id": "x"}}}', r"task 'x' needs a string 'title'"),
        (
            json.dumps({"tasks": {"AAAAAAAA": crafted("AAAAAAAA", status="blocked")}}).encode(),
            r"task 'AAAAAAAA' has status 'blocked'",
        ),
        (
            json.dumps(
                {"tasks": {"AAAAAAAA": {**crafted("AAAAAAAA"), "depends_on": "x"}}}
            ).encode(),
            r"needs 'depends_on' as a list",
        ),
        (b"\xff\xfe", r"not UTF-8"),
    ],
)
def test_corrupt_file_is_reported_and_never_overwritten(
    workspace: Path, content: bytes, expected: str
) -> None:
    path = workspace / ".tasks.json"
    path.write_bytes(content)
    tasks = manager(workspace)  # loading (the tool list) does not fail
    for attempt in (
        lambda: tasks.create("x"),
        lambda: tasks.list(),
        lambda: tasks.get("AAAAAAAA"),
        lambda: tasks.update("AAAAAAAA", status="done"),
        lambda: tasks.reload(),
    ):
        with pytest.raises(TaskStoreError, match=expected):
            attempt()
    assert path.read_bytes() == content
    assert not (workspace / ".toold" / "tasks.json.bak").exists()
    with pytest.raises(TaskStoreError, match="fix or remove it"):
        tasks.create("x")


def test_backup_holds_the_previous_version(tasks: TaskManager, workspace: Path) -> None:
    path, backup = workspace / ".tasks.json", workspace / ".toold" / "tasks.json.bak"
    a = tasks.create("a")["id"]
    assert not backup.exists()  # nothing to keep before the first write
    first = path.read_bytes()
    tasks.create("b")
    assert backup.read_bytes() == first
    second = path.read_bytes()
    tasks.update(a, status="done")
    assert backup.read_bytes() == second
    assert sorted(p.name for p in backup.parent.iterdir()) == ["tasks.json.bak", "tasks.lock"]


FAILING_WRITE = textwrap.dedent(
    """
    import json, resource, signal, sys
    from pathlib import Path
    from toold.planning.tasks import TaskManager

    ws = Path(sys.argv[1])
    tasks = TaskManager(ws / ".tasks.json", lock_path=ws / ".toold" / "tasks.lock",
                        backup_path=ws / ".toold" / "tasks.json.bak")
    kept = tasks.create("kept")
    before = (ws / ".tasks.json").read_bytes()
    # A full disk, for real: files may not grow past 64 KiB from now on.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    try:
        tasks.create("too big", description="x" * 100_000)
    except OSError as exc:
        error = str(exc)
    else:
        error = None
    print(json.dumps({
        "error": error,
        "snapshot": [t["title"] for t in tasks.snapshot()],
        "unchanged": (ws / ".tasks.json").read_bytes() == before,
        "files": sorted(p.name for p in ws.iterdir()),
    }))
    """
)


def test_failed_write_rolls_back_memory_and_leaves_the_file(workspace: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", FAILING_WRITE, str(workspace)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["error"] is not None and "too large" in report["error"].lower()
    assert report["snapshot"] == ["kept"]
    assert report["unchanged"] is True
    assert report["files"] == [".tasks.json", ".toold"]  # no temp file left behind


def test_unbound_tools_say_unavailable(call: Call) -> None:
    assert call.failed("task_list") == "Task manager unavailable."
