"""An engine stopped because it was idle logs who asked and why: ``toold daemon stop
--if-idle``, the test suite's sweep, or a newer engine's ``daemon.max_idle_engines``
(tests/engine/test_idle_engines.py reads that one), never one reason for all."""

from __future__ import annotations

import json
from pathlib import Path

from tests.engine.support import Engines
from tests.idle_engines import REASON, stop_idle_engines
from tests.processes import process_alive, wait_gone
from tests.waiting import wait_until
from toold.engine.location import workspace_key


def _used_once(engines: Engines, folder: Path) -> int:
    """An engine a ``toold call`` used, idle once the call ended: its pid."""
    (folder / "a.txt").write_text("alpha\n")
    done = engines.toold("call", "read_file", '{"file_path": "a.txt"}', cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    wait_until(lambda: engines.status(folder)["idle"], "the engine to count as idle", 40)
    return int(engines.status(folder)["pid"])


def _stopping_line(engines: Engines, folder: Path) -> str:
    lines = (engines.runtime / f"{workspace_key(folder)}.log").read_text().splitlines()
    [line] = [line for line in lines if " stopping: " in line]
    return line.split(" stopping: ", 1)[1]


def test_daemon_stop_if_idle_leaves_a_busy_engine_and_names_itself(
    engines: Engines, tmp_path: Path
) -> None:
    editor = engines.editor(tmp_path)  # attached: busy
    pid = int(engines.status(tmp_path)["pid"])
    stop = ("daemon", "stop", "--if-idle", "--json", "--workspace", str(tmp_path))
    busy = engines.toold(*stop, cwd=tmp_path)
    assert (busy.returncode, json.loads(busy.stdout)) == (0, {"stopped": False, "pid": pid})
    assert process_alive(pid)
    assert editor.close() == 0
    wait_until(lambda: engines.status(tmp_path)["idle"], "the engine to count as idle", 40)
    idle = engines.toold(*stop, cwd=tmp_path)
    assert (idle.returncode, json.loads(idle.stdout)) == (0, {"stopped": True, "pid": pid})
    wait_gone(pid, "the idle engine")
    line = _stopping_line(engines, tmp_path)
    assert line.startswith("idle, asked to stop if idle by pid "), line
    assert line.endswith(": toold daemon stop --if-idle"), line
    assert "max_idle_engines" not in line
    none = engines.toold("daemon", "stop", "--if-idle", cwd=tmp_path)
    assert (none.returncode, none.stdout.strip()) == (0, f"no toold engine runs for {tmp_path}")


def test_the_suites_sweep_names_itself(engines: Engines, tmp_path: Path) -> None:
    pid = _used_once(engines, tmp_path)
    assert stop_idle_engines(engines.runtime) == [pid]
    line = _stopping_line(engines, tmp_path)
    assert line.endswith(f": {REASON}") and "max_idle_engines" not in line, line


def test_if_idle_goes_with_stop_of_one_engine(engines: Engines, tmp_path: Path) -> None:
    status = engines.toold("daemon", "status", "--if-idle", cwd=tmp_path)
    assert (status.returncode, status.stderr.strip()) == (
        2,
        "toold: --if-idle goes with stop only: toold daemon stop --if-idle",
    )
    every = engines.toold("daemon", "stop", "--all", "--if-idle", cwd=tmp_path)
    assert every.returncode == 2 and "not --all" in every.stderr
