"""Empty commands and two names for one argument are invalid arguments, before the guard;
"Always allow" stores exactly the command line that was shown.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import DaemonFactory, held

INVALID: list[tuple[str, dict[str, Any]]] = [
    ("bash", {"command": "", "cmd": "rm -rf d"}),
    ("bash", {"command": "", "input": "rm -rf d"}),
    ("bash", {"cmd": "", "input": "rm -rf d"}),
    ("bash", {"command": None, "cmd": "rm -rf d"}),
    ("bash", {"command": "ls", "cmd": "rm -rf d"}),
    ("bash", {"command": "rm -rf d", "cmd": "rm -rf d"}),
    ("bash", {"command": ""}),
    ("bash", {"command": " "}),
    ("bash", {"command": "\n\t "}),
    ("bash", {"cmd": ""}),
    ("bash", {"input": "   "}),
    ("bash", {}),
    ("background_run", {"command": ""}),
    ("background_run", {"command": "  \n"}),
    ("background_run", {"command": "", "cmd": "rm -rf d"}),
    ("read_file", {"file_path": "", "path": ".env"}),
    ("write_file", {"file_path": "", "path": "canary.txt", "content": "x"}),
    ("edit_file", {"file_path": "a", "path": "canary.txt", "old_text": "c", "new_text": "x"}),
]


@pytest.mark.parametrize(("tool", "args"), INVALID)
@pytest.mark.parametrize("mode", ["auto", "default"])
def test_empty_and_ambiguous_arguments_are_invalid_before_the_guard(
    daemon_for: DaemonFactory, mode: str, tool: str, args: dict[str, Any]
) -> None:
    daemon = daemon_for(mode, answer="Always allow")
    asked = len(daemon.client.asked)
    result = daemon.call(tool, args)
    assert held(result), result
    assert str(result["content"]).startswith("Error: invalid arguments"), result
    assert len(daemon.client.asked) == asked  # never reached the guard
    assert daemon.damage() == []


def test_always_allow_stores_exactly_the_command_shown(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("default", answer="Always allow")
    asked = len(daemon.client.asked)
    first = daemon.call("bash", {"command": "touch pwned"})
    assert not first["isError"], first
    assert daemon.call("bash", {"command": "touch pwned"}) == first
    assert len(daemon.client.asked) == asked + 1  # the repeat ran unasked
    # Anything else is asked again: longer, other whitespace, another alias, a prefix.
    for command in ["touch pwned; touch x", "touch  pwned", "touch pwned\nrm -f a", "touch"]:
        daemon.call("bash", {"command": command})
    daemon.call("bash", {"cmd": "touch pwned && touch b"})
    assert len(daemon.client.asked) == asked + 6
    daemon.damage()
    (daemon.workspace / "x").unlink(missing_ok=True)


def test_always_allow_on_an_empty_command_stores_nothing(daemon_for: DaemonFactory) -> None:
    daemon = daemon_for("default", answer="Always allow")
    daemon.call("bash", {"command": "", "cmd": "ls"})
    asked = len(daemon.client.asked)
    result = daemon.call("bash", {"command": "rm -f canary.txt"})
    assert len(daemon.client.asked) == asked + 1  # asked: no blanket bash() rule exists
    assert not result["isError"]  # the user (answering Always allow) let it run
    assert daemon.damage() == ["canary.txt"]
