"""``toold run`` steps beyond tools: requests of the contract and waits for notifications."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.ci.support import step_lines, toold_run
from toold.ci.methods import matches


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def test_method_steps_give_their_result_to_expect_and_references(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {
                    "method": "tasks/list",
                    "params": {"status": "pending"},
                    "expect": {"equals": {"tasks": []}},
                },
                {"id": "made", "tool": "task_create", "arguments": {"title": "ship it"}},
                {"id": "listed", "method": "tasks/list", "params": {"status": "pending"}},
                {
                    "tool": "task_update",
                    "arguments": {"task_id": "${steps.listed.result.tasks.0.id}", "status": "done"},
                },
                {
                    "method": "tasks/list",
                    "params": {"status": "done"},
                    "expect": {"contains": '"title": "ship it"'},
                },
                {
                    "method": "jobs/get",
                    "params": {"jobId": "nope"},
                    "expect": {"isError": True, "contains": "nope"},
                },
            ]
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = step_lines(done)
    assert [line.split()[:3] for line in lines] == [
        ["✓", "steps[0]", "tasks/list"],
        ["✓", "made", "task_create"],
        ["✓", "listed", "tasks/list"],
        ["✓", "steps[3]", "task_update"],
        ["✓", "steps[4]", "tasks/list"],
        ["✓", "steps[5]", "jobs/get"],
    ]
    tasks = json.loads((workspace / ".tasks.json").read_text())
    assert "done" in json.dumps(tasks)


def test_a_tools_call_method_step_is_judged_as_a_tool_step(workspace: Path) -> None:
    call = {"name": "bash", "arguments": {"command": "echo out; exit 3"}, "origin": "user"}
    done = toold_run(
        workspace,
        {
            "steps": [
                {"id": "c", "method": "tools/call", "params": call, "expect": {"isError": True}},
                {"method": "tools/call", "params": call},
            ]
        },
    )
    assert done.returncode == 1
    first, second = step_lines(done)
    assert first.startswith("✓ c  tools/call  ")
    assert second.startswith("✗ steps[1]  tools/call  ") and "exit code 3" in second


def test_an_error_answer_fails_a_method_step_and_names_the_error(workspace: Path) -> None:
    done = toold_run(workspace, {"steps": [{"method": "jobs/get", "params": {"jobId": "nope"}}]})
    assert done.returncode == 1
    (line,) = step_lines(done)
    assert line.startswith("✗ steps[0]  jobs/get  ")
    assert line.endswith('{"code": -33002, "message": "Unknown job: nope"}'), line


def wait_until_done(job: str) -> dict[str, object]:
    """A bash step that returns once the job's record on disk says it ended: the daemon
    sends jobs/finished before it writes the record, so the notification is already in."""
    loop = f'until grep -qs \'"status": "done"\' .toold/jobs/{job}.json; do sleep 0.05; done'
    return {"tool": "bash", "arguments": {"command": loop, "timeout": 60}}


def test_a_notification_that_came_before_the_wait_counts_once(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"tool": "background_run", "arguments": {"command": "echo hi", "task_id": "quick"}},
                wait_until_done("quick"),
                {
                    "id": "quick",
                    "wait_for": "jobs/finished",
                    "match": {"jobId": "quick", "status": "done"},
                    "timeout": 5,
                },
                {
                    "tool": "bash",
                    "arguments": {
                        "command": "echo ${steps.quick.result.exitCode}/"
                        "${steps.quick.result.result}"
                    },
                    "expect": {"equals": "0/hi"},
                },
                {
                    "id": "again",
                    "wait_for": "jobs/finished",
                    "match": {"jobId": "quick"},
                    "timeout": 0.3,
                },
            ]
        },
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = step_lines(done)
    assert [line.split()[:2] for line in lines] == [
        ["✓", "steps[0]"],
        ["✓", "steps[1]"],
        ["✓", "quick"],
        ["✓", "steps[3]"],
        ["✗", "again"],
    ]
    # Each notification satisfies one wait: the second finds it taken, and says what came.
    assert lines[-1].startswith("✗ again  wait_for jobs/finished  "), lines[-1]
    assert (
        lines[-1]
        .split("  ", 3)[3]
        .startswith(
            'no jobs/finished notification matching {"jobId": "quick"} within 0.3s; '
            'seen: 1 jobs/finished ({"jobId": "quick", "status": "done"'
        )
    ), lines[-1]


def test_a_wait_that_times_out_fails_naming_what_it_awaited(
    workspace: Path, tmp_path: Path
) -> None:
    report = tmp_path / "toold.xml"
    done = toold_run(
        workspace,
        {
            "steps": [
                {"id": "never", "wait_for": "todos/changed", "match": {"todos": []}, "timeout": 0.2}
            ]
        },
        "--junit",
        str(report),
    )
    assert done.returncode == 1
    (line,) = step_lines(done)
    assert line.endswith(
        'no todos/changed notification matching {"todos": []} within 0.2s; '
        "seen: no notification at all"
    ), line
    case = ET.parse(report).getroot().find("testsuite/testcase")
    assert case is not None and case.get("classname") == "toold.wait_for todos/changed"
    failure = case.find("failure")
    assert failure is not None and "within 0.2s" in (failure.get("message") or "")


def test_method_and_wait_steps_are_checked_before_anything_runs(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"tool": "write_file", "arguments": {"file_path": "ran.txt", "content": "x"}},
                {"id": "t", "method": "task/list"},
                {"method": "tasks/list", "params": {"status": "maybe", "stat": 1}},
                {"wait_for": "job/finished"},
                {"wait_for": "jobs/finished", "match": {"jobid": "x"}},
                {"method": "jobs/get", "params": {"jobId": "${steps.t.content}"}},
                {"method": "jobs/get", "params": {"jobId": "${steps.t.result}"}},
                {"method": "jobs/get", "params": {"jobId": 5}},
            ]
        },
    )
    assert done.returncode == 2
    assert done.stdout == ""
    methods = (
        "agent/run, checkpoints/diff, checkpoints/list, checkpoints/restore, diagnostics/get, "
        "jobs/cancel, jobs/get, jobs/list, permissions/setMode, skills/list, tasks/list, "
        "team/register, todos/list, tools/call, tools/list"
    )
    assert done.stderr.splitlines()[1:] == [
        "  steps[1].method: unknown method 'task/list'; did you mean 'tasks/list'? one of: "
        + methods,
        "  steps[2].params.status: Input should be 'pending', 'in_progress', 'done' or "
        "'failed' (got 'maybe')",
        "  steps[2].params.stat: unknown field; did you mean 'status'? expected one of: status",
        "  steps[3].wait_for: unknown notification 'job/finished'; did you mean "
        "'jobs/finished'? one of: $/progress, diagnostics/changed, execution/event, "
        "jobs/finished, "
        "permissions/preview, skills/changed, tasks/changed, team/message, todos/changed, "
        "window/logMessage, window/showMessage",
        "  steps[4].match.jobid: jobs/finished has no such field; did you mean 'jobId'? "
        "fields: jobId, status, command, result, error, exitCode, startedAt, finishedAt",
        "  steps[5].params.jobId: ${steps.t.content}: step 't' is a method step, its value is "
        "${steps.t.result}",
        "  steps[7].params.jobId: Input should be a valid string (got 5)",
    ]
    assert not (workspace / "ran.txt").exists()


def test_a_step_does_one_thing(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"tool": "grep", "method": "tasks/list"},
                {"tool": "grep", "params": {}, "timeout": 3},
                {"fallback": [{"wait_for": "jobs/finished", "arguments": {}}]},
            ]
        },
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[1:] == [
        "  steps[0]: give one of tool, method, not both",
        "  steps[1].params: only a method step takes params; a tool step takes arguments",
        "  steps[1].timeout: only a wait_for step takes timeout; a tool step takes arguments",
        '  steps[2]: a step needs one of tool, method or wait_for: e.g. "tool": "read_file" '
        '(see `toold tools`), "method": "tasks/list" or "wait_for": "jobs/finished"',
        "  steps[2].fallback[0].arguments: only a tool step takes arguments; a wait_for step "
        "takes match and timeout",
    ]


@pytest.mark.parametrize(
    ("params", "wanted", "expected"),
    [
        ({"jobId": "a", "status": "done"}, {"jobId": "a"}, True),
        ({"jobId": "a"}, {"jobId": "a", "status": "done"}, False),
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, True),  # objects: subsets at any depth
        ({"a": {"b": 1}}, {"a": {"b": 2}}, False),
        ({"l": [{"x": 1, "y": 2}, 3]}, {"l": [{"x": 1}, 3]}, True),  # arrays: element-wise
        ({"l": [1, 2, 3]}, {"l": [1, 2]}, False),  # ... and the same length
        ({"n": 1.0}, {"n": 1}, True),  # JSON numbers
        ({"n": 1}, {"n": True}, False),  # true is not 1
        ({"n": None}, {"n": None}, True),
        ({}, {"n": None}, False),  # null must be there
        ({"anything": 1}, {}, True),
    ],
)
def test_match_is_a_subset_match(params: object, wanted: object, expected: bool) -> None:
    assert matches(params, wanted) is expected
