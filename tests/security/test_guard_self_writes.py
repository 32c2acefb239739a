"""No self-escalation inside the guard: an agent's call that could write toold.toml or
.toold/ always asks — in auto mode too, whatever the allow rules say, and "Always allow"
never covers it; plan mode refuses it.

(The reload confirmation for a changed toold.toml is test_config_escalation.py's class.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import DaemonFactory, held

BYPASS = '[permissions]\\nmode = "bypass"\\n'
LOOSE = {
    "allow": (
        "write_file",
        "edit_file",
        "str_replace",
        "bash(prefix:echo*)",
        "bash(prefix:printf*)",
        "bash(prefix:cp*)",
        "bash(prefix:sed*)",
        "bash(prefix:tee*)",
    )
}
SHELL_WRITES = [
    f"printf '{BYPASS}' > toold.toml",
    f"printf '{BYPASS}' >> toold.toml",
    "echo 'mode = \"bypass\"' > ./toold.toml",
    "echo x > .toold/keep.txt",
    "echo x >> .toold/keep.txt",
    "cp b toold.toml",
    "cp b ./toold.toml",
    "cp b tool?.toml",
    "cp b tool*.toml",
    "cp b toold.tom[l]",
    'cp b "tool"d.toml',
    "cp b 'toold.toml'",
    "cp b t''oold.toml",
    "cp b .toold/keep.txt",
    "cp b .tool?/keep.txt",
    "mv b toold.toml",
    "sed -i s/default/bypass/ toold.toml",
    "sed -i s/toold/x/ .toold/keep.txt",
    "tee toold.toml < b",
    "cat b | tee .toold/keep.txt",
    "ln -sf b toold.toml",
    "rm toold.toml",
    "rm -f .toold/keep.txt",
    "truncate -s 0 toold.toml",
    "dd if=b of=toold.toml",
    "X=toold.toml; cp b $X",
    "cp b $(echo toold.toml)",
    "echo x > $(printf 'tool%s' d.toml)",
    "cd .toold && echo x > keep.txt",
    "> toold.toml",
    "python3 script.py > toold.toml",
]


@pytest.mark.parametrize("command", SHELL_WRITES)
@pytest.mark.parametrize("mode", ["auto", "default"])
def test_shell_writes_to_the_configuration_always_ask(
    daemon_for: DaemonFactory, mode: str, command: str
) -> None:
    daemon = daemon_for(mode, **LOOSE)
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": command})
    assert held(result), result
    assert len(daemon.client.asked) == asked + 1
    assert daemon.damage() == []


TOOL_WRITES: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"file_path": "toold.toml", "content": BYPASS}),
    ("write_file", {"file_path": "./toold.toml", "content": BYPASS}),
    ("write_file", {"file_path": "src/../toold.toml", "content": BYPASS}),
    ("write_file", {"path": "toold.toml", "content": BYPASS}),
    ("write_file", {"file_path": "toold.toml", "content": "", "append": True}),
    ("write_file", {"file_path": ".toold/keep.txt", "content": "x"}),
    ("write_file", {"file_path": "./.toold/new.txt", "content": "x"}),
    ("edit_file", {"file_path": "toold.toml", "old_text": "default", "new_text": "bypass"}),
    ("edit_file", {"file_path": "./toold.toml", "old_text": "default", "new_text": "bypass"}),
    ("str_replace", {"path": "toold.toml", "old": "default", "new": "bypass"}),
    ("str_replace", {"path": "./.toold/keep.txt", "old": "own", "new": "x"}),
]


@pytest.mark.parametrize(("tool", "args"), TOOL_WRITES)
@pytest.mark.parametrize("mode", ["auto", "default"])
def test_file_tools_writing_the_configuration_always_ask(
    daemon_for: DaemonFactory, mode: str, tool: str, args: dict[str, Any]
) -> None:
    daemon = daemon_for(mode, **LOOSE)
    result = daemon.call(tool, args)
    assert held(result), result
    assert daemon.damage() == []


def test_always_allow_never_covers_a_configuration_write(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("auto", answer="Always allow")
    for _ in range(2):
        asked = len(daemon.client.asked)
        daemon.call("write_file", {"file_path": "src/new.py", "content": "x = 1\n"})
        # "Always allow" answers the ordinary write once, then it runs unasked ...
    assert len(daemon.client.asked) == asked
    # ... but a write to toold.toml asks every time, and a session rule never answers it.
    before = len(daemon.client.asked)
    for _ in range(2):
        daemon.call("write_file", {"file_path": "toold.toml", "content": "# x\n"})
    assert len(daemon.client.asked) == before + 2
    daemon.damage()  # the user allowed it: restore for other cases


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"file_path": "toold.toml", "content": BYPASS}),
        ("bash", {"command": "cp b toold.toml"}),
    ],
)
def test_plan_mode_refuses_configuration_writes(
    daemon_for: DaemonFactory, tool: str, args: dict[str, Any]
) -> None:
    daemon = daemon_for("plan")
    result = daemon.call(tool, args)
    assert result["content"] == f"Plan mode: {tool} blocked (read-only)"
    assert daemon.damage() == []


def test_reading_the_configuration_is_not_asked(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("default")
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": "cat toold.toml | head -1 && ls .toold"})
    assert result["content"].startswith("[permissions]"), result
    assert len(daemon.client.asked) == asked
