"""permissions/setMode is the asking session's: other sessions on the engine keep theirs."""

from __future__ import annotations

from pathlib import Path

from tests.engine.support import Engines


def _agent_write(editor, name: str) -> dict:  # type: ignore[no-untyped-def]
    params = {"name": "write_file", "arguments": {"file_path": name, "content": "x"}}
    result: dict = editor.call("tools/call", {**params, "origin": "agent"})
    return result


def test_a_mode_is_the_sessions_own(engines: Engines, workspace: Path) -> None:
    planning = engines.editor(workspace)
    other = engines.editor(workspace)
    assert engines.status(workspace)["pid"]  # one engine serves both

    assert planning.call("permissions/setMode", {"mode": "plan"}) == {"mode": "plan"}
    refused = _agent_write(planning, "planned.txt")
    assert refused["isError"] and "Plan mode" in refused["content"], refused
    assert not (workspace / "planned.txt").exists()

    # The other session's agent asks as in default mode: with no prompt capability that
    # is a refusal, but not plan mode's. Bypass there does not reach the planning one.
    asked = _agent_write(other, "other.txt")
    assert asked["isError"] and "Plan mode" not in asked["content"], asked
    assert other.call("permissions/setMode", {"mode": "bypass"}) == {"mode": "bypass"}
    assert not _agent_write(other, "other.txt")["isError"]
    assert (workspace / "other.txt").read_text() == "x"
    still = _agent_write(planning, "planned.txt")
    assert still["isError"] and "Plan mode" in still["content"], still

    # A new session starts in the workspace's mode, not in either of theirs.
    fresh = engines.editor(workspace)
    third = _agent_write(fresh, "fresh.txt")
    assert third["isError"] and "Plan mode" not in third["content"], third
    assert not (workspace / "fresh.txt").exists()


def test_a_reload_of_the_rules_reaches_a_session_with_its_own_mode(
    engines: Engines, workspace: Path
) -> None:
    editor = engines.editor(workspace)
    assert editor.call("permissions/setMode", {"mode": "auto"}) == {"mode": "auto"}
    before = _agent_write(editor, "denied.txt")  # the session's guard exists from here
    assert before.get("rule") is None, before
    (workspace / "toold.toml").write_text(
        '[permissions]\ndeny = ["write_file(denied.txt)"]\n', encoding="utf-8"
    )
    # A tightening applies without asking; the session's next request waits for it.
    editor.notify("workspace/didChangeConfiguration", {"settings": {}})
    refused = _agent_write(editor, "denied.txt")
    # A deny rule asks and is never approvable; this session cannot be asked: refused,
    # naming the rule its own guard (a child of the workspace's) now holds.
    assert refused["isError"] and refused.get("rule") == "write_file(denied.txt)", refused
    assert not (workspace / "denied.txt").exists()
