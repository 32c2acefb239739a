"""``toold daemon list [--json]`` and ``toold daemon stop --all`` over real engines."""

from __future__ import annotations

import json
from pathlib import Path

from tests.engine.support import Engines, live_engines
from tests.processes import wait_gone
from tests.waiting import wait_until

SETTINGS = '[execution]\ntool_runner = "local"\n'
"""The job waits for a file the test makes (the local runner sees the workspace as is)."""


def _folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\n")
    (folder / "toold.toml").write_text(SETTINGS)
    return folder


def test_list_shows_every_engine_with_its_sessions_jobs_memory_and_idle_time(
    engines: Engines, tmp_path: Path
) -> None:
    edited, working, idle = (_folder(tmp_path, name) for name in ("edited", "working", "idle"))
    editor = engines.editor(edited)
    job = json.dumps({"command": "while [ ! -e go ]; do sleep 0.02; done", "task_id": "w"})
    assert engines.toold("call", "background_run", job, cwd=working).returncode == 0
    assert engines.toold("call", "read_file", '{"file_path": "a.txt"}', cwd=idle).returncode == 0

    def listed() -> dict[str, dict[str, object]]:
        done = engines.toold("daemon", "list", "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return {entry["workspace"]: entry for entry in json.loads(done.stdout)}

    # The one-shot sessions end as their clients exit: wait until the engines know.
    by_workspace = wait_until(
        lambda: (found := listed()) and found[str(idle)]["idleFor"] is not None and found,
        "the idle engine to be idle",
    )
    assert set(by_workspace) == {str(edited), str(working), str(idle)}
    assert sorted(entry["pid"] for entry in by_workspace.values()) == sorted(
        live_engines(engines.runtime)
    )
    assert by_workspace[str(edited)]["sessions"] == 1
    assert by_workspace[str(edited)]["idleFor"] is None  # busy: an editor is attached
    assert by_workspace[str(working)]["jobs"] == 1
    assert by_workspace[str(working)]["idleFor"] is None  # busy: a job runs
    quiet = by_workspace[str(idle)]
    assert quiet["sessions"] == 0 and quiet["jobs"] == 0
    assert quiet["idleLimit"] == 60  # a one-shot workspace (CI unset: see support.Engines)
    for entry in by_workspace.values():
        assert isinstance(entry["rss"], int) and entry["rss"] > 10 * 2**20
        assert isinstance(entry["inotify"], int) and isinstance(entry["lastUsed"], float)

    text = engines.toold("daemon", "list", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["PID", "SESSIONS", "JOBS", "RSS", "IDLE", "WORKSPACE"]
    assert any(line.endswith(str(edited)) and " busy " in line for line in lines)
    assert any(line.endswith(str(idle)) and "exits at 60 s" in line for line in lines)
    assert lines[-1].startswith("3 engines, ")
    (working / "go").touch()
    editor.close()


def test_stop_all_stops_every_engine_and_names_cancelled_jobs(
    engines: Engines, tmp_path: Path
) -> None:
    idle, working = _folder(tmp_path, "idle"), _folder(tmp_path, "working")
    assert engines.toold("daemon", "start", cwd=idle).returncode == 0
    job = json.dumps({"command": "sleep 600", "task_id": "endless"})
    assert engines.toold("call", "background_run", job, cwd=working).returncode == 0
    pids = live_engines(engines.runtime)
    assert len(pids) == 2

    done = engines.toold("daemon", "stop", "--all", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == []
    stopped = {entry["workspace"]: entry for entry in report["stopped"]}
    assert set(stopped) == {str(idle), str(working)}
    assert stopped[str(working)]["cancelled"] == ["endless"]
    assert sorted(entry["pid"] for entry in stopped.values()) == sorted(pids)
    wait_gone(pids, "the stopped engines")  # stop --all returns once they let go
    assert live_engines(engines.runtime) == []

    again = engines.toold("daemon", "stop", "--all", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.strip() == "no toold engine runs"
    empty = engines.toold("daemon", "list", "--json", cwd=tmp_path)
    assert json.loads(empty.stdout) == []


def test_all_goes_with_stop_only(engines: Engines, tmp_path: Path) -> None:
    done = engines.toold("daemon", "status", "--all", cwd=tmp_path)
    assert done.returncode == 2
    assert "--all goes with stop only" in done.stderr
