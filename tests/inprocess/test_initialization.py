"""initializationOptions checked by the protocol's InitializationOptions model, strictly.

The model's aliases are toold's keys: its snake_case field names are not (pydantic
would accept them by name); its types are strict: ``1`` is not true, a number is not
a folder. Each refusal is one window/showMessage; the keys that are right still apply.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inprocess.client import InProcessClient


@pytest.fixture
def fresh(workspace: Path) -> Iterator[InProcessClient]:
    """An in-process daemon the test initializes itself."""
    c = InProcessClient(workspace)
    yield c
    assert c.close() == 0


def test_field_names_and_lax_values_are_refused(fresh: InProcessClient, workspace: Path) -> None:
    fresh.initialize(
        rootUri=workspace.as_uri(),
        processId=None,
        initializationOptions={
            "execution_events": True,
            "executionEvents": 1,
            "workspace": 7,
            "limits": {"grep_max_matches": 1},
        },
    )
    shown = [fresh.notification("window/showMessage")["params"]["message"] for _ in range(3)]
    assert shown[0].startswith(
        "toold: initializationOptions.execution_events: unknown key, not applied; "
        "did you mean 'executionEvents'?"
    )
    assert shown[1:] == [
        "toold: initializationOptions.executionEvents: expected true or false",
        "toold: initializationOptions.workspace: expected a folder path (string)",
    ]
    # The top-level toold.toml section applied; the refused workspace did not.
    grep = fresh.tool("grep", pattern="needle")
    assert len(grep["content"]) == 1, grep


def test_options_that_are_not_an_object_are_refused_whole(
    fresh: InProcessClient, workspace: Path
) -> None:
    fresh.initialize(rootUri=workspace.as_uri(), processId=None, initializationOptions=[1])
    assert fresh.notification("window/showMessage")["params"]["message"] == (
        "toold: initializationOptions must be an object (got list); nothing of it was applied"
    )
    assert fresh.tool("read_file", file_path="src/main.py")["isError"] is False
