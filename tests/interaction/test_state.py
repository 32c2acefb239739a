"""Todos, tasks, skills and background jobs through the in-process daemon, on raw JSON.

Moved from tests/e2e and tests/inprocess: the same requests, notifications and files
through the daemon's own session and transport (lsp_front.py); a restart is a second
daemon on the folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.wire import job_id_of
from tests.interaction.conftest import OpenLsp
from tests.interaction.lsp_front import InProcessDaemon
from tests.processes import process_alive, wait_gone
from tests.waiting import wait_until

EDIT_NOTICE_S = 2.0  # an outside edit must reach the editor within this


def wire_task(task: dict[str, Any], ready: bool) -> dict[str, Any]:
    """A task dict as tools return it (the spec's snake_case), as views show it (camelCase)."""
    camel = {"depends_on": "dependsOn", "created_at": "createdAt", "updated_at": "updatedAt"}
    return {**{camel.get(k, k): v for k, v in task.items()}, "ready": ready}


def test_restarted_daemon_keeps_todos_and_finished_jobs(lsp: OpenLsp, workspace: Path) -> None:
    first = lsp(workspace)
    first.tool("todo_write", action="add", task="Survive", priority="high")
    job = job_id_of(first.tool("background_run", command="echo persisted"))
    assert first.job_finished(job)["status"] == "done"
    assert first.close() == 0

    second = lsp(workspace)
    assert second.tool("todo_read")["content"] == "TODO items:\n- t1 [pending] (high) Survive"
    assert second.call("todos/list", {})["todos"] == [
        {"id": "t1", "task": "Survive", "status": "pending", "priority": "high"}
    ]
    [listed] = second.call("jobs/list", {})["jobs"]
    assert (listed["jobId"], listed["status"], listed["result"]) == (job, "done", "persisted")
    assert listed["exitCode"] == 0
    assert second.call("jobs/get", {"jobId": job})["output"] == "persisted\n"
    added = second.tool("todo_write", action="add", task="next")
    assert added["content"] == "Added TODO t2 [normal]: next"


def test_todo_write_pushes_todos_changed(client: InProcessDaemon) -> None:
    added = client.tool("todo_write", action="add", task="Create planner")
    assert added == {"content": "Added TODO t1 [normal]: Create planner", "isError": False}
    assert client.notification("todos/changed")["params"] == {
        "todos": [{"id": "t1", "task": "Create planner", "status": "pending", "priority": "normal"}]
    }
    bad = client.tool("todo_write", action="update", task_id="t7", status="done")
    assert bad == {"content": "Error: ValueError: Unknown TODO id: t7", "isError": True}
    client.tool("todo_write", action="update", task_id="t1", status="done")
    assert client.notification("todos/changed")["params"]["todos"][0]["status"] == "done"
    assert client.call("todos/list", {})["todos"][0]["status"] == "done"


def test_jobs_finished_wire_shape(client: InProcessDaemon) -> None:
    ok = job_id_of(client.tool("background_run", command="echo hi"))
    done = client.job_finished(ok)
    common = {"jobId", "status", "command", "exitCode", "startedAt", "finishedAt"}
    assert set(done) == common | {"result"}
    assert (done["status"], done["command"], done["result"], done["exitCode"]) == (
        "done",
        "echo hi",
        "hi",
        0,
    )
    assert done["startedAt"] <= done["finishedAt"]

    bad = job_id_of(client.tool("background_run", command="echo no >&2; exit 3"))
    failed = client.job_finished(bad)
    assert set(failed) == common | {"error"}
    assert (failed["status"], failed["exitCode"]) == ("failed", 3)
    assert failed["error"] == "Command failed with exit code 3\nno"

    jobs = client.call("jobs/list", {})["jobs"]
    assert [j["jobId"] for j in jobs] == [ok, bad]


def test_jobs_get_output_so_far_and_cancel_kills_the_group(local_client: InProcessDaemon) -> None:
    client = local_client  # the child's pid ($!) is the host's outside a PID namespace
    job = job_id_of(client.tool("background_run", command="sleep 300 & echo child=$!; wait"))

    def output() -> str:
        detail = client.call("jobs/get", {"jobId": job})
        return detail["output"] if "child=" in detail["output"] else ""

    text = wait_until(output, "the job's first output")
    child = int(text.split("child=")[1].split()[0])
    detail = client.call("jobs/get", {"jobId": job})
    assert detail["status"] == "running"
    assert "finishedAt" not in detail and "exitCode" not in detail
    assert process_alive(child)
    again = client.tool("background_run", command="true", task_id=job)
    assert again == {
        "content": f"Error: ValueError: Background task already running: {job}",
        "isError": True,
    }

    cancelled = client.call("jobs/cancel", {"jobId": job})
    assert (cancelled["jobId"], cancelled["status"]) == (job, "cancelled")
    pushed = client.job_finished(job)
    assert (pushed["status"], pushed["error"]) == ("cancelled", "Cancelled.")
    wait_gone(child, "the background child")
    assert client.call("jobs/cancel", {"jobId": job})["status"] == "cancelled"


def test_unknown_job_is_not_found(client: InProcessDaemon) -> None:
    for method in ("jobs/get", "jobs/cancel"):
        reply = client.response(client.request(method, {"jobId": "nope"}))
        assert reply["error"] == {"code": -33002, "message": "Unknown job: nope"}, method
    reply = client.response(client.request("jobs/get", {"jobId": ""}))
    assert reply["error"]["code"] == -32602


def test_tasks_list_with_ready_flags(client: InProcessDaemon) -> None:
    a = client.tool("task_create", title="a")["content"]
    b = client.tool("task_create", title="b", depends_on=[a["id"]])["content"]
    assert client.notification("tasks/changed")["params"]["tasks"][0]["id"] == a["id"]
    ready = {t["id"]: t["ready"] for t in client.call("tasks/list", {})["tasks"]}
    assert ready == {a["id"]: True, b["id"]: False}
    client.tool("task_update", task_id=a["id"], status="done")
    listed = client.call("tasks/list", {"status": "pending"})["tasks"]
    assert listed == [wire_task(b, ready=True)]
    bad = client.tool("task_update", task_id=a["id"])
    assert bad == {"content": "Error: ValueError: status or title is required", "isError": True}
    reply = client.response(client.request("tasks/list", {"status": "open"}))
    assert reply["error"]["code"] == -32602


def test_outside_edit_of_tasks_file_arrives_as_tasks_changed(
    client: InProcessDaemon, workspace: Path
) -> None:
    assert client.call("tasks/list", {}) == {"tasks": []}  # answers once edits are watched
    stamp = "2024-05-01T10:00:00+00:00"
    task = {
        "id": "EDITED01",
        "title": "from the editor",
        "description": "",
        "status": "pending",
        "depends_on": [],
        "created_at": stamp,
        "updated_at": stamp,
    }
    (workspace / ".tasks.json").write_text(json.dumps({"tasks": {"EDITED01": task}}, indent=2))
    pushed = client.notification("tasks/changed", timeout=EDIT_NOTICE_S)["params"]
    assert pushed == {"tasks": [wire_task(task, ready=True)]}
    # The daemon builds on the edited file.
    created = client.tool("task_create", title="after", depends_on=["EDITED01"])["content"]
    assert created["depends_on"] == ["EDITED01"]


def test_corrupt_tasks_file_is_reported_and_kept(client: InProcessDaemon, workspace: Path) -> None:
    client.call("tasks/list", {})
    path = workspace / ".tasks.json"
    path.write_text("{oops", encoding="utf-8")
    shown = client.notification("window/showMessage", timeout=EDIT_NOTICE_S)["params"]
    assert ".tasks.json is not valid JSON" in shown["message"]
    result = client.tool("task_create", title="x")
    assert result["isError"] is True
    assert "fix or remove it" in result["content"]
    reply = client.response(client.request("tasks/list", {}))
    assert ".tasks.json is not valid JSON" in reply["error"]["message"]
    assert path.read_text(encoding="utf-8") == "{oops"


def test_invalid_config_edit_is_shown_and_the_daemon_keeps_working(
    client: InProcessDaemon, workspace: Path
) -> None:
    client.call("skills/list", {})  # answers once edits are watched
    (workspace / "toold.toml").write_text("[limits]\nbash_output_chars = 5\n", encoding="utf-8")
    shown = client.notification("window/showMessage", timeout=EDIT_NOTICE_S)["params"]
    assert shown["type"] == 1
    assert "limits.bash_output_chars" in shown["message"]
    assert "keeping the previous configuration" in shown["message"]
    assert client.tool("bash", command="echo still here") == {
        "content": "still here",
        "isError": False,
        "exitCode": 0,
    }


def test_new_skill_folder_arrives_as_skills_changed(
    client: InProcessDaemon, workspace: Path
) -> None:
    skills = client.call("skills/list", {})["skills"]
    assert {"code-review", "debugging"} <= {s["name"] for s in skills}
    assert all(set(s) == {"name", "description", "path"} for s in skills)
    assert not (workspace / ".toold" / "skills").exists()

    folder = workspace / ".toold" / "skills" / "release"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("# Release\n\nCut a release.\n", encoding="utf-8")
    pushed = client.notification("skills/changed", timeout=EDIT_NOTICE_S)["params"]["skills"]
    assert {
        "name": "release",
        "description": "Cut a release.",
        "path": str(folder / "SKILL.md"),
    } in pushed
    # ...and the folder is watched from now on.
    (folder / "SKILL.md").write_text("# Release\n\nCut it carefully.\n", encoding="utf-8")
    pushed = client.notification("skills/changed", timeout=EDIT_NOTICE_S)["params"]["skills"]
    assert next(s for s in pushed if s["name"] == "release")["description"] == "Cut it carefully."
    loaded = client.tool("load_skill", skill_name="release")
    assert loaded == {"content": "# Release\n\nCut it carefully.", "isError": False}


def test_only_the_newest_finished_jobs_are_kept(lsp: OpenLsp, workspace: Path) -> None:
    (workspace / "toold.toml").write_text("[limits]\nmax_finished_jobs = 1\n", encoding="utf-8")
    client = lsp(workspace)
    first = job_id_of(client.tool("background_run", command="echo first"))
    assert client.job_finished(first)["result"] == "first"
    second = job_id_of(client.tool("background_run", command="echo second"))
    assert client.job_finished(second)["result"] == "second"
    assert [j["jobId"] for j in client.call("jobs/list", {})["jobs"]] == [second]
    reply = client.response(client.request("jobs/get", {"jobId": first}))
    assert reply["error"] == {"code": -33002, "message": f"Unknown job: {first}"}
    folder = workspace / ".toold" / "jobs"
    assert {p.name for p in folder.iterdir()} == {".lock", f"{second}.json", f"{second}.log"}
