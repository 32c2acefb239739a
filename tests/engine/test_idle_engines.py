"""Bounded engines: the one-shot rule, the CI rule, and idle engines giving way to a new one.

The rules themselves (``toold.engine.idle``) are checked as functions; the rest runs real
engines on the default path (``engines`` fixture), each test choosing whether ``CI=true``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.engine.support import Engines, live_engines
from tests.processes import process_alive, wait_gone
from tests.waiting import wait_until
from toold.config import DaemonConfig
from toold.engine.idle import ONE_SHOT_IDLE, idle_limit, in_ci, is_editor, victims

# -- the rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("editor_seen", "one_shot_ended", "ci", "setting", "expected"),
    [
        (False, False, False, None, 1800.0),  # nothing ended yet (daemon start): as configured
        (False, True, False, None, ONE_SHOT_IDLE),  # only one-shot commands: 60 s
        (False, True, True, None, 0.0),  # ... and under CI: at once
        (True, True, False, None, 1800.0),  # an editor came once: the editor's timeout
        (True, True, True, None, 1800.0),  # also under CI
        (False, True, True, 5.0, 5.0),  # the setting wins over the CI default
        (False, True, False, 7200.0, 1800.0),  # never longer than idle_timeout
    ],
)
def test_the_one_shot_rule(
    editor_seen: bool, one_shot_ended: bool, ci: bool, setting: float | None, expected: float
) -> None:
    limit = idle_limit(
        1800.0, setting, editor_seen=editor_seen, one_shot_ended=one_shot_ended, ci=ci
    )
    assert limit == expected


def test_who_counts_as_an_editor() -> None:
    assert is_editor("stdio", "Visual Studio Code", 4242)
    assert is_editor("stdio", "toold serve", 4242)  # a relay whose client named its pid
    assert not is_editor("stdio", "toold serve", None)  # `toold serve < script`: piped
    assert not is_editor("stdio", "toold-run", 4242)  # toold run names its own pid
    assert not is_editor("session", "toold-cli", 4242)  # toold call, tools, jobs


def test_ci_is_read_as_ci_services_set_it() -> None:
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"}) and in_ci({"CI": " TRUE "})
    assert not in_ci({}) and not in_ci({"CI": "false"}) and not in_ci({"CI": ""})


def _status(pid: int, last_used: float, idle: bool = True) -> dict[str, Any]:
    return {"pid": pid, "lastUsed": last_used, "idle": idle}


def test_the_least_recently_used_idle_engines_give_way_first() -> None:
    others = [_status(1, 100.0), _status(2, 300.0), _status(3, 200.0), _status(4, 400.0)]
    # Cap 3 counts the new engine: two others stay, the two least recently used go.
    assert [s["pid"] for s in victims(others, 3)] == [1, 3]
    assert [s["pid"] for s in victims(others, 1)] == [1, 3, 2, 4]
    assert victims(others, 5) == []


def test_busy_and_older_engines_are_never_chosen() -> None:
    others = [
        _status(1, 1.0, idle=False),  # a session, a job or a teammate, or just started
        {"pid": 2, "lastUsed": 2.0},  # an older engine, which cannot say it is idle
        _status(3, 3.0),
    ]
    assert [s["pid"] for s in victims(others, 1)] == [3]


def test_the_settings_are_validated() -> None:
    assert DaemonConfig().max_idle_engines == 8
    assert DaemonConfig().one_shot_idle_timeout is None
    with pytest.raises(ValueError, match="max_idle_engines"):
        DaemonConfig.model_validate({"max_idle_engines": 0})
    with pytest.raises(ValueError, match="one_shot_idle_timeout"):
        DaemonConfig.model_validate({"one_shot_idle_timeout": -1})


# -- real engines ------------------------------------------------------------------------

LOCAL = '[execution]\ntool_runner = "local"\n'
"""A job that waits for a file the test makes (local_runner: the engine's own view)."""


def _folder(root: Path, name: str, toml: str = "") -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\n")
    if toml:
        (folder / "toold.toml").write_text(toml)
    return folder


def _call(engines: Engines, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = engines.toold("call", *args, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _engine_pid(engines: Engines, folder: Path) -> int:
    return int(engines.status(folder)["pid"])


def test_a_one_shot_workspace_idles_shorter_than_an_editors(
    engines: Engines, tmp_path: Path
) -> None:
    settings = "[daemon]\none_shot_idle_timeout = 0.5\n"
    edited = _folder(tmp_path, "edited", settings)
    one_shot = _folder(tmp_path, "one-shot", settings)
    editor = engines.editor(edited)
    editor.call("tools/call", {"name": "read_file", "arguments": {"file_path": "a.txt"}})
    edited_pid = _engine_pid(engines, edited)
    editor.close()  # the editor's session ended first: it has had more idle time
    _call(engines, one_shot, "read_file", '{"file_path": "a.txt"}')
    one_shot_pid = next(pid for pid in live_engines(engines.runtime) if pid != edited_pid)
    wait_gone(one_shot_pid, "the one-shot workspace's engine")
    assert process_alive(edited_pid)  # an editor came: daemon.idle_timeout (30 min) holds
    assert engines.status(edited)["idleLimit"] == 1800


def _framed(*messages: dict[str, Any]) -> str:
    """LSP frames of ``messages`` (a session piped into ``toold serve``)."""
    bodies = [json.dumps({"jsonrpc": "2.0", **message}) for message in messages]
    return "".join(f"Content-Length: {len(body)}\r\n\r\n{body}" for body in bodies)


def test_toold_run_and_a_piped_serve_count_as_one_shot(engines: Engines, tmp_path: Path) -> None:
    ran = _folder(tmp_path, "ran")
    (ran / "check.toml").write_text(
        '[[steps]]\ntool = "read_file"\narguments = { file_path = "a.txt" }\n'
    )
    done = engines.toold("run", "check.toml", cwd=ran)
    assert done.returncode == 0, done.stdout + done.stderr
    piped = _folder(tmp_path, "piped")
    session = _framed(
        {"id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}},
        {"method": "initialized", "params": {}},
        {"id": 2, "method": "shutdown"},
        {"method": "exit"},
    )
    done = engines.toold("serve", cwd=piped, stdin=session)
    assert done.returncode == 0, done.stderr  # 0: after shutdown and exit
    for folder in (ran, piped):  # once the engine has seen the session end
        wait_until(
            lambda folder=folder: engines.status(folder)["idleLimit"] == ONE_SHOT_IDLE,
            f"the engine of {folder.name} to apply the one-shot rule",
        )


def test_under_ci_a_one_shot_engine_exits_with_its_last_session(
    engines: Engines, tmp_path: Path
) -> None:
    engines.env["CI"] = "true"
    folder = _folder(tmp_path, "ci")
    _call(engines, folder, "read_file", '{"file_path": "a.txt"}')
    wait_until(lambda: not live_engines(engines.runtime), "the CI engine to exit")
    kept = _folder(tmp_path, "kept", "[daemon]\none_shot_idle_timeout = 600\n")
    _call(engines, kept, "read_file", '{"file_path": "a.txt"}')
    assert engines.status(kept)["idleLimit"] == 600  # an explicit setting wins over CI's 0


def test_under_ci_back_to_back_calls_all_succeed(engines: Engines, tmp_path: Path) -> None:
    """Each call's engine exits as the call ends; the next call, attaching while it
    goes, starts a fresh one (which waits for the old one's pid lock)."""
    engines.env["CI"] = "true"
    folder = _folder(tmp_path, "again")
    for _ in range(3):
        assert "alpha" in _call(engines, folder, "read_file", '{"file_path": "a.txt"}').stdout
    wait_until(lambda: not live_engines(engines.runtime), "the last CI engine to exit")


def test_under_ci_a_running_job_keeps_the_engine_until_it_ends(
    engines: Engines, tmp_path: Path
) -> None:
    engines.env["CI"] = "true"
    folder = _folder(tmp_path, "job", LOCAL)  # the job waits for a file the test makes
    job = {"command": "while [ ! -e go ]; do sleep 0.02; done", "task_id": "waiting"}
    _call(engines, folder, "background_run", json.dumps(job))
    status = engines.status(folder)  # the session ended; the job holds the engine
    assert [j["jobId"] for j in status["jobs"]] == ["waiting"] and status["idleFor"] is None
    (folder / "go").touch()
    wait_gone(int(status["pid"]), "the CI engine once its job ended")
    waited = engines.toold("jobs", "wait", "waiting", cwd=folder)  # a new engine reads it
    assert waited.returncode == 0, waited.stderr


def _start(engines: Engines, folder: Path) -> int:
    done = engines.toold("daemon", "start", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["pid"])


def test_a_new_engine_stops_idle_ones_beyond_the_cap_never_busy_ones(
    engines: Engines, tmp_path: Path
) -> None:
    settings = "[daemon]\nmax_idle_engines = 1\none_shot_idle_timeout = 600\n"
    edited = _folder(tmp_path, "edited", settings)
    working = _folder(tmp_path, "working", settings + LOCAL)
    idle = _folder(tmp_path, "idle", settings)
    editor = engines.editor(edited)  # attached: busy
    edited_pid = _engine_pid(engines, edited)
    job = {"command": "while [ ! -e go ]; do sleep 0.02; done", "task_id": "running"}
    _call(engines, working, "background_run", json.dumps(job))  # a job runs: busy
    working_pid = _engine_pid(engines, working)
    _call(engines, idle, "read_file", '{"file_path": "a.txt"}')
    idle_pid = _engine_pid(engines, idle)
    wait_until(lambda: engines.status(idle)["idle"], "the idle engine to count as idle", 40)
    newest = _folder(tmp_path, "newest", settings)
    _call(engines, newest, "read_file", '{"file_path": "a.txt"}')
    wait_gone(idle_pid, "the idle engine, least recently used beyond the cap")
    assert process_alive(edited_pid) and process_alive(working_pid)
    log = (engines.runtime / f"{_key(idle)}.log").read_text()
    assert (  # the engine that made room, named in the stopped one's log
        "beyond daemon.max_idle_engines = 1 (the engine of "
        f"{newest.resolve()}, pid {_engine_pid(engines, newest)}, made room)"
    ) in log
    (working / "go").touch()
    editor.close()


def _key(folder: Path) -> str:
    from toold.engine.location import workspace_key

    return workspace_key(folder)


def test_engines_starting_together_never_stop_each_other(engines: Engines, tmp_path: Path) -> None:
    """Six clients in six fresh workspaces at once, with room for one idle engine: every
    call is answered (a new engine is busy until its first client came)."""
    settings = "[daemon]\nmax_idle_engines = 1\none_shot_idle_timeout = 600\n"
    folders = [_folder(tmp_path, f"w{i}", settings) for i in range(6)]
    calls = [
        subprocess.Popen(
            [sys.executable, "-m", "toold", "call", "read_file", '{"file_path": "a.txt"}'],
            cwd=folder,
            env=engines.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in folders
    ]
    for call in calls:
        out, err = call.communicate(timeout=120)
        assert call.returncode == 0 and "alpha" in out, err
