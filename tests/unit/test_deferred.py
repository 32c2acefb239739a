"""The deferred tools: schemas visible from the start, 'unavailable' answers without managers."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Call


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("background_run", {"command": "echo hi"}, "Background manager unavailable."),
        ("subagent", {"task": "look around"}, "Subagent unavailable: provider is not configured."),
        ("team_spawn", {"name": "alice"}, "Team spawning unavailable for alice."),
        ("team_send", {"to_agent": "bob", "content": "hi"}, "Team messaging unavailable for bob."),
        ("team_list", {}, []),
    ],
)
def test_unavailable_answers(call: Call, name: str, args: dict[str, Any], expected: Any) -> None:
    done = call.outcome(name, **args)
    assert done.content == expected
    assert done.is_error == (expected != [])  # "unavailable" is a failure; an empty list not


def test_deferred_arguments_are_still_validated(call: Call) -> None:
    with call.fails(ValueError, match="timeout"):
        call("background_run", command="x", timeout=0)
    with call.fails(ValueError, match="task: Field required"):
        call("subagent")
    with call.fails(ValueError, match="unexpected argument"):
        call("team_list", verbose=True)
