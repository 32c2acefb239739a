"""Two private ``toold acp`` processes on one folder: neither loses the other's TODOs or tasks.

With TOOLD_NO_DAEMON=1 each process binds the workspace itself
(toold.opening.open_workspace) and holds its own TodoManager and TaskManager over
``.toold/todos.json`` and ``.tasks.json``. Both stores change the file under an flock
shared between processes, on the file as it is then, so the second process's write
keeps the first one's. (By default both share the engine's one workspace:
tests/engine/test_acp_engine.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

from acp import text_block

from tests.acp.conftest import Recorder, acp_agent, agent_env, run, start_session
from tests.agents.conftest import ModelServer, tool_results


def _turn(model: ModelServer, who: str) -> None:
    """One turn of ``who``: a TODO and a task of its own, then an answer."""
    model.tool_use(
        ("todo_write", {"action": "add", "task": f"todo of {who}"}),
        ("task_create", {"title": f"task of {who}"}),
    )
    model.text(f"{who} planned.")


def test_two_acp_processes_on_one_folder_keep_each_others_writes(
    model: ModelServer, workspace: Path
) -> None:
    first, second = Recorder(), Recorder()
    _turn(model, "A")
    _turn(model, "B")
    # A again, after B wrote: it marks B's TODO done, which it must see to do so.
    model.tool_use(("todo_write", {"action": "update", "task_id": "t2", "status": "done"}))
    model.text("A saw B's TODO.")

    async def scenario() -> list[str]:
        env = agent_env(model, TOOLD_NO_DAEMON="1")
        async with (
            acp_agent(workspace, env, first) as conn_a,
            acp_agent(workspace, env, second) as conn_b,
        ):
            # Both sessions are bound (each loaded the empty stores) before either writes.
            session_a = await start_session(conn_a, workspace)
            session_b = await start_session(conn_b, workspace)
            stops: list[str] = []
            for conn, session in ((conn_a, session_a), (conn_b, session_b), (conn_a, session_a)):
                await conn.set_session_mode(session_id=session, mode_id="bypass")
                reply = await conn.prompt(session_id=session, prompt=[text_block("plan")])
                stops.append(reply.stop_reason)
            return stops

    assert run(scenario, timeout=120) == ["end_turn"] * 3
    answers = [r["content"] for body in model.wait_requests(6) for r in tool_results(body)]
    assert "Added TODO t1 [normal]: todo of A" in answers
    assert "Added TODO t2 [normal]: todo of B" in answers  # not a second t1 over A's
    assert "Updated TODO t2 -> done" in answers

    saved = json.loads((workspace / ".toold" / "todos.json").read_text(encoding="utf-8"))
    assert [(i["id"], i["task"], i["status"]) for i in saved["items"]] == [
        ("t1", "todo of A", "pending"),
        ("t2", "todo of B", "done"),
    ]
    tasks = json.loads((workspace / ".tasks.json").read_text(encoding="utf-8"))["tasks"]
    assert sorted(t["title"] for t in tasks.values()) == ["task of A", "task of B"]

    def last_plan(recorder: Recorder) -> list[tuple[str, str]]:
        return [(e["content"], e["status"]) for e in recorder.updates("plan")[-1]["entries"]]

    # Each client's plan is the shared list as its own process last wrote it.
    assert last_plan(second) == [("todo of A", "pending"), ("todo of B", "pending")]
    assert last_plan(first) == [("todo of A", "pending"), ("todo of B", "completed")]
