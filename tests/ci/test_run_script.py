"""``toold run``: CI scripts run end to end through ``python -m toold run`` and a real daemon."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.ci.support import step_lines, toold_run


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print('needle')\n", encoding="utf-8")
    return ws


def test_steps_run_in_sequence_with_one_line_each(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"id": "find", "tool": "grep", "arguments": {"pattern": "needle"}},
                {"id": "read", "tool": "read_file", "arguments": {"file_path": "src/main.py"}},
                {"tool": "write_file", "arguments": {"file_path": "out.txt", "content": "done"}},
            ]
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = step_lines(done)
    assert [line.split()[:3] for line in lines] == [
        ["✓", "find", "grep"],
        ["✓", "read", "read_file"],
        ["✓", "steps[2]", "write_file"],
    ]
    assert lines[1].endswith("1: print('needle')")
    assert lines[2].endswith("Wrote 4 characters to out.txt")
    assert done.stdout.splitlines()[-1].startswith("ok: 3 passed in ")
    assert (workspace / "out.txt").read_text() == "done"


def test_a_failed_step_stops_the_run_and_exits_1(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"id": "edit", "tool": "edit_file", "arguments": edit_args("zz")},
                {"id": "after", "tool": "write_file", "arguments": write_args("never.txt")},
            ]
        },
    )
    assert done.returncode == 1
    first, second = step_lines(done)
    assert first.startswith("✗ edit  edit_file  ")
    assert first.endswith("Error: ValueError: old_text not found in file")
    assert second == "- after  write_file  not run: edit failed"
    assert done.stdout.splitlines()[-1].startswith("FAILED: 1 failed, 1 skipped in ")
    assert not (workspace / "never.txt").exists()


def test_a_non_zero_exit_code_fails_the_step(workspace: Path) -> None:
    script = {"steps": [{"tool": "bash", "arguments": {"command": "echo details; exit 3"}}]}
    done = toold_run(workspace, script)
    assert done.returncode == 1
    assert step_lines(done)[0].startswith("✗ steps[0]  bash  ")
    assert step_lines(done)[0].endswith("Command failed with exit code 3")
    # The whole output of a failed step goes to stderr, for the CI log.
    assert done.stderr.splitlines() == ["    Command failed with exit code 3", "    details"]


def test_fallback_rescues_the_step_and_gives_its_result(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {
                    "id": "patch",
                    "tool": "edit_file",
                    "arguments": edit_args("missing"),
                    "fallback": [
                        {
                            "id": "why",
                            "tool": "read_file",
                            "arguments": {"file_path": "src/main.py"},
                        },
                        {
                            "tool": "write_file",
                            "arguments": {
                                "file_path": "fixed.txt",
                                "content": "${steps.patch.content}",
                            },
                        },
                    ],
                },
                {
                    "tool": "read_file",
                    "arguments": {"file_path": "fixed.txt"},
                    "expect": {"equals": "1: Error: ValueError: old_text not found in file"},
                },
                {
                    "tool": "write_file",
                    "arguments": {"file_path": "rescue.txt", "content": "${steps.patch.content}"},
                },
            ]
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = step_lines(done)
    assert lines[0].startswith("✗ patch  edit_file  ")
    assert lines[1].startswith("  ✓ why  read_file  ")
    assert lines[2].startswith("  ✓ steps[0].fallback[1]  write_file  ")
    assert lines[3] == "  ↳ patch rescued by fallback"
    assert done.stdout.splitlines()[-1].startswith("ok: 4 passed, 1 rescued in ")
    # Once rescued, the step's content is its fallback's last result.
    assert (workspace / "rescue.txt").read_text() == "Wrote 45 characters to fixed.txt"


def test_a_failing_fallback_does_not_rescue(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {
                    "id": "patch",
                    "tool": "edit_file",
                    "arguments": edit_args("missing"),
                    "fallback": [
                        {"id": "also", "tool": "read_file", "arguments": {"file_path": "nope.txt"}},
                        {"id": "unreached", "tool": "glob", "arguments": {"pattern": "*.py"}},
                    ],
                },
                {"id": "next", "tool": "glob", "arguments": {"pattern": "*.py"}},
            ]
        },
    )
    assert done.returncode == 1
    lines = step_lines(done)
    assert [line.split()[:2] for line in lines] == [
        ["✗", "patch"],
        ["✗", "also"],
        ["-", "unreached"],
        ["-", "next"],
    ]


def test_continue_on_error_runs_later_steps_but_the_run_fails(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {
                    "id": "optional",
                    "tool": "read_file",
                    "arguments": {"file_path": "absent.txt"},
                    "continue_on_error": True,
                },
                {"id": "later", "tool": "write_file", "arguments": write_args("later.txt")},
            ]
        },
    )
    assert done.returncode == 1
    assert [line.split()[:2] for line in step_lines(done)] == [["✗", "optional"], ["✓", "later"]]
    assert (workspace / "later.txt").exists()


def test_expect_checks_is_error_contains_and_equals(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {
                    "id": "escape",
                    "tool": "read_file",
                    "arguments": {"file_path": "../outside.txt"},
                    "expect": {"isError": True, "contains": "escapes workspace"},
                },
                {
                    "id": "grep",
                    "tool": "grep",
                    "arguments": {"pattern": "needle"},
                    "expect": {"equals": ["src/main.py:1:print('needle')"]},
                },
                {
                    "id": "wrong-text",
                    "tool": "read_file",
                    "arguments": {"file_path": "src/main.py"},
                    "expect": {"contains": "haystack"},
                    "continue_on_error": True,
                },
                {
                    "id": "wrong-value",
                    "tool": "grep",
                    "arguments": {"pattern": "needle"},
                    "expect": {"equals": []},
                    "continue_on_error": True,
                },
                {
                    "id": "not-an-error",
                    "tool": "glob",
                    "arguments": {"pattern": "*.py"},
                    "expect": {"isError": True},
                },
            ]
        },
    )
    assert done.returncode == 1
    lines = step_lines(done)
    assert lines[0].startswith("✓ escape") and lines[1].startswith("✓ grep")
    assert lines[2].endswith("expected the content to contain 'haystack'; got: 1: print('needle')")
    assert lines[3].endswith(
        "expected the content to equal []; got: [\"src/main.py:1:print('needle')\"]"
    )
    assert lines[4].startswith("✗ not-an-error")
    assert "expected isError=true, but it succeeded" in lines[4]


def test_references_insert_earlier_content(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"id": "files", "tool": "glob", "arguments": {"pattern": "*.py"}},
                {"id": "text", "tool": "read_file", "arguments": {"file_path": "src/main.py"}},
                {
                    "tool": "write_file",
                    "arguments": {
                        "file_path": "report.txt",
                        "content": "files=${steps.files.content} text=${steps.text.content} "
                        "literal=$${steps.files.content} shell=${HOME}",
                    },
                },
                {
                    "tool": "read_file",
                    "arguments": {"file_path": "report.txt"},
                    "expect": {"contains": "text=${steps.text.content}"},
                },
            ]
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "report.txt").read_text() == (
        "files=[\"src/main.py\"] text=1: print('needle') "
        "literal=${steps.files.content} shell=${HOME}"
    )


def test_reference_to_a_step_that_did_not_run_fails_that_step(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {
                    "tool": "glob",
                    "arguments": {"pattern": "*.py"},
                    "fallback": [{"id": "spare", "tool": "glob", "arguments": {"pattern": "*"}}],
                },
                {"tool": "read_file", "arguments": {"file_path": "${steps.spare.content}"}},
            ]
        },
    )
    assert done.returncode == 1
    assert "${steps.spare.content}: step 'spare' has no result" in step_lines(done)[1]


def test_junit_report_has_a_testcase_per_step(workspace: Path, tmp_path: Path) -> None:
    report = tmp_path / "reports" / "toold.xml"
    done = toold_run(
        workspace,
        {
            "steps": [
                {"id": "read", "tool": "read_file", "arguments": {"file_path": "src/main.py"}},
                {
                    "id": "patch",
                    "tool": "edit_file",
                    "arguments": edit_args("missing"),
                    "fallback": [{"id": "spare", "tool": "glob", "arguments": {"pattern": "*.py"}}],
                },
                {"id": "broken", "tool": "read_file", "arguments": {"file_path": "nope.txt"}},
                {"id": "never", "tool": "glob", "arguments": {"pattern": "*"}},
            ]
        },
        "--junit",
        str(report),
    )
    assert done.returncode == 1
    root = ET.parse(report).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("name") == "toold"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == ["read", "patch", "spare", "broken", "never"]
    assert cases["read"].get("classname") == "toold.read_file"
    assert cases["read"].findtext("system-out") == "1: print('needle')"
    assert cases["patch"].find("failure") is None
    assert "rescued by its fallback" in (cases["patch"].findtext("system-out") or "")
    failure = cases["broken"].find("failure")
    assert failure is not None
    assert "FileNotFoundError" in (failure.get("message") or "")
    skipped = cases["never"].find("skipped")
    assert skipped is not None and skipped.get("message") == "not run: broken failed"


def test_toml_script(workspace: Path) -> None:
    script = """
[[steps]]
id = "patch"
tool = "edit_file"
arguments = { file_path = "src/main.py", old_text = "absent", new_text = "x" }

[[steps.fallback]]
tool = "edit_file"
arguments = { file_path = "src/main.py", old_text = "needle", new_text = "pin" }

[[steps]]
tool = "read_file"
arguments = { file_path = "src/main.py" }
expect = { equals = "1: print('pin')" }
"""
    done = toold_run(workspace, script, name="checks.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "src" / "main.py").read_text() == "print('pin')\n"


def test_script_from_stdin(workspace: Path) -> None:
    script = {"steps": [{"tool": "glob", "arguments": {"pattern": "*.py"}}]}
    done = subprocess.run(
        [sys.executable, "-m", "toold", "run", "-", "--workspace", str(workspace)],
        input=json.dumps(script),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert step_lines(done)[0].endswith('["src/main.py"]')


def test_a_bad_script_is_refused_naming_each_field(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"tool": "grep", "argument": {"pattern": "x"}},
                {"id": "a b", "arguments": [], "expect": {"is_eror": True}},
                {"tool": "glob", "fallback": [{"tool": ""}], "continue-on-error": True},
            ]
        },
    )
    assert done.returncode == 2
    assert done.stdout == ""
    problems = done.stderr.splitlines()[1:]
    keys = (
        "id, tool, arguments, method, params, wait_for, match, timeout, expect, "
        "continue_on_error, fallback"
    )
    assert problems == [
        f"  steps[0].argument: unknown key; did you mean 'arguments'? expected one of: {keys}",
        '  steps[1]: a step needs one of tool, method or wait_for: e.g. "tool": "read_file" '
        '(see `toold tools`), "method": "tasks/list" or "wait_for": "jobs/finished"',
        "  steps[1].id: 'a b' is not a valid id; use letters, digits, _ and -",
        "  steps[1].arguments: must be an object (a table in TOML) (got [])",
        "  steps[1].expect.is_eror: unknown key; did you mean 'isError'? expected one of: "
        "isError, contains, equals",
        "  steps[2].continue-on-error: unknown key; did you mean 'continue_on_error'? expected "
        f"one of: {keys}",
        "  steps[2].fallback[0].tool: String should have at least 1 character (got '')",
    ]


def test_unknown_references_and_tools_are_refused_before_running(workspace: Path) -> None:
    refs = toold_run(
        workspace,
        {
            "steps": [
                {"tool": "read_file", "arguments": {"file_path": "${steps.later.content}"}},
                {"id": "later", "tool": "glob", "arguments": {"pattern": "${steps.nope.content}"}},
                {"id": "later", "tool": "glob", "expect": {"contains": "${steps.later.size}"}},
            ]
        },
    )
    assert refs.returncode == 2
    assert refs.stderr.splitlines()[1:] == [
        "  steps[0].arguments.file_path: unknown reference ${steps.later.content}: "
        "step 'later' (steps[1]) does not run before it",
        "  steps[1].arguments.pattern: unknown reference ${steps.nope.content}: "
        "no step has the id 'nope'",
        "  steps[2].expect.contains: malformed reference ${steps.later.size}; "
        "write ${steps.<id>.content} or ${steps.<id>.result}",
        "  steps[2].id: 'later' is already the id of steps[1]; ids must be unique",
    ]
    tools = toold_run(
        workspace,
        {
            "steps": [
                {"tool": "file_write", "arguments": write_args("alias.txt")},
                {"tool": "gerp", "arguments": {"pattern": "x"}},
            ]
        },
    )
    assert tools.returncode == 2
    assert tools.stdout == ""
    assert "steps[1].tool: unknown tool 'gerp'; did you mean 'grep'?" in tools.stderr
    assert not (workspace / "alias.txt").exists()


def test_arguments_are_checked_against_each_schema_before_running(workspace: Path) -> None:
    done = toold_run(
        workspace,
        {
            "steps": [
                {"tool": "write_file", "arguments": write_args("first.txt")},
                {"tool": "grep", "arguments": {"pattern": 5}},
                {"tool": "read_file", "arguments": {"file": "src/main.py"}},
                {"tool": "bash", "arguments": {"command": "true", "timeout": "soon"}},
                {
                    "tool": "bash",
                    "arguments": {"command": "true"},
                    "fallback": [{"tool": "glob", "arguments": {"patern": "*.py"}}],
                },
                # No argument model: its JSON Schema from tools/list.
                {"tool": "calculator", "arguments": {"input": 5}},
            ]
        },
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    # The tool's own argument model judges (the daemon's code), naming field and fix.
    assert done.stderr.splitlines()[1:] == [
        "  steps[1].arguments.pattern: Input should be a valid string (got 5)",
        "  steps[2].arguments.file_path: Field required; pass file_path (or path)",
        "  steps[2].arguments.file: unexpected argument; did you mean 'file_path'? expected one "
        "of: file_path, offset, limit, encoding",
        "  steps[3].arguments.timeout: Input should be a valid integer, unable to parse string "
        "as an integer (got 'soon')",
        "  steps[4].fallback[0].arguments.pattern: Field required",
        "  steps[4].fallback[0].arguments.patern: unexpected argument; did you mean 'pattern'? "
        "expected one of: pattern, path, include_ignored",
        "  steps[5].arguments.input: 5 is not of type 'string'",
    ]
    assert not (workspace / "first.txt").exists()


def test_values_holding_references_are_judged_when_the_step_runs(workspace: Path) -> None:
    # ${steps.n.content} is "5" only once n ran; the tool coerces "5" and "15" to integers.
    script = {
        "steps": [
            {"id": "n", "tool": "calculator", "arguments": {"input": "2+3"}},
            {"tool": "bash", "arguments": {"command": "echo a", "timeout": "${steps.n.content}"}},
            {"tool": "bash", "arguments": {"command": "echo b", "timeout": "1${steps.n.content}"}},
            # Jianmu's argument names pass the check as they pass the tool.
            {"tool": "read_file", "arguments": {"path": "src/main.py", "encoding": "utf-8"}},
        ]
    }
    done = toold_run(workspace, script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(step_lines(done)) == 4
    # A value that is no integer after substitution fails its step, not the check.
    script["steps"][1]["arguments"]["timeout"] = "x${steps.n.content}"
    late = toold_run(workspace, script)
    assert late.returncode == 1
    assert "timeout: Input should be a valid integer" in step_lines(late)[1]


def test_a_tool_answering_its_error_text_fails_the_step(workspace: Path) -> None:
    script = {
        "steps": [
            {"id": "div", "tool": "calculator", "arguments": {"input": "1/0"}},
            {"id": "after", "tool": "calculator", "arguments": {"input": "1+1"}},
        ]
    }
    done = toold_run(workspace, script)
    assert done.returncode == 1
    first, second = step_lines(done)
    assert first.startswith("✗ div  calculator  ")
    assert first.endswith("Error: division by zero")
    assert second == "- after  calculator  not run: div failed"


def test_unreadable_scripts_exit_2(workspace: Path) -> None:
    broken = toold_run(workspace, '{"steps": [', name="broken.json")
    assert broken.returncode == 2
    assert "not valid JSON" in broken.stderr
    wrong = toold_run(workspace, "steps: []", name="script.yaml")
    assert wrong.returncode == 2
    assert "name it *.json or *.toml" in wrong.stderr


def edit_args(old_text: str) -> dict[str, str]:
    return {"file_path": "src/main.py", "old_text": old_text, "new_text": "x"}


def write_args(file_path: str) -> dict[str, str]:
    return {"file_path": file_path, "content": "x"}
