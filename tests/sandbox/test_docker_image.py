"""The docker runner builds its image on first use, once, and again when its inputs change.

Each test uses an image tag of its own (``toold-sandbox:test-...``, removed afterwards),
so it never races the tests that share ``toold-sandbox:latest``.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from tests.e2e.wire import WireClient
from tests.idle_engines import stop_engine
from tests.sandbox.conftest import progress_until, start_call
from tests.waiting import wait_until
from toold.config import TooldConfig
from toold.sandbox import docker_image
from toold.sandbox.docker_image import (
    INPUTS_LABEL,
    RUNTIME_LABEL,
    connect,
    ensure_image,
    image_labels,
    inputs_hash,
    lock_path,
)
from toold.sandbox.runners import make_runner
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

pytestmark = pytest.mark.usefixtures("docker_ready")


@pytest.fixture
def tag() -> Iterator[str]:
    """A sandbox image tag no other test uses; gone before and after the test."""
    name = f"toold-sandbox:test-{uuid.uuid4().hex[:12]}"
    yield name
    client = connect(timeout=30)
    try:
        for image in client.images.list(name=name):
            # The last call's container removes itself just after the call ends.
            wait_until(
                lambda i=image: not client.api.containers(all=True, filters={"ancestor": i.id}),
                f"the containers of {name} to go",
            )
            client.images.remove(image.id, force=True)
    finally:
        client.close()


def _config(tag: str) -> TooldConfig:
    execution = {"tool_runner": "docker", "docker_image": tag, "warm_workers": 0}
    return TooldConfig.model_validate({"execution": execution})


async def _read_notes(tools: ToolSet, runner: Any, heard: list[str]) -> Any:
    """One read_file of notes.txt through ``runner``, its progress into ``heard``."""
    return await user_call(
        tools, "read_file", {"file_path": "notes.txt"}, progress=heard.append, runner=runner
    )


def _calls(workspace: Path, config: TooldConfig, count: int) -> tuple[Any, list[Any], list[str]]:
    """``count`` read_file calls at once through one docker runner: the runner's problem
    before the first call, the outcomes, and the progress they reported."""
    progress: list[str] = []

    async def run() -> tuple[Any, list[Any]]:
        runner = make_runner(config, workspace)
        problem = runner.problem
        tools = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, config)).get_tools())
        try:
            outcomes = await asyncio.gather(
                *(_read_notes(tools, runner, progress) for _ in range(count))
            )
        finally:
            await runner.close()
        return problem, outcomes

    problem, outcomes = asyncio.run(run())
    return problem, outcomes, progress


def _tag_events(tag: str, since: float) -> int:
    """How many times the engine tagged ``tag`` (one per build) since ``since``."""
    client = connect(timeout=30)
    try:
        events = client.events(
            since=int(since) - 1, until=time.time() + 0.5, decode=True, filters={"type": "image"}
        )
        return sum(
            1
            for event in events
            if event.get("Action") == "tag" and event["Actor"]["Attributes"].get("name") == tag
        )
    finally:
        client.close()


def test_the_first_call_builds_the_missing_image_once(workspace: Path, tag: str) -> None:
    since = time.time()
    problem, outcomes, progress = _calls(workspace, _config(tag), 3)
    assert problem is None  # nothing to warn about when the workspace is bound
    for outcome in outcomes:
        assert not outcome.is_error, outcome.content
        assert outcome.content == "1: alpha\n2: beta"
    assert progress[0] == f"building the Docker image {tag} offline (first use)"
    assert sum("is ready (built in" in text for text in progress) == 1, progress
    client = connect(timeout=30)
    try:
        labels = image_labels(client, tag)
    finally:
        client.close()
    assert labels is not None
    assert labels[INPUTS_LABEL] == inputs_hash() and labels[RUNTIME_LABEL] == "host"
    assert _tag_events(tag, since) == 1
    # The next runner finds it current: no build, no progress.
    _, outcomes, progress = _calls(workspace, _config(tag), 1)
    assert not outcomes[0].is_error and progress == []
    assert _tag_events(tag, since) == 1


def test_two_engines_first_calls_build_once(tmp_path: Path, tag: str) -> None:
    clients = []
    try:
        for name in ("one", "two"):
            ws = tmp_path / name
            ws.mkdir()
            (ws / "notes.txt").write_text("alpha\n", encoding="utf-8")
            (ws / "toold.toml").write_text(
                f'[execution]\ntool_runner = "docker"\ndocker_image = "{tag}"\n', encoding="utf-8"
            )
            client = WireClient(ws)
            client.initialize(rootUri=ws.as_uri())
            client.call("skills/list", {})  # answers once the workspace (and runner) is bound
            clients.append(client)
        since = time.time()
        calls = [
            start_call(c, "read_file", f"t{i}", file_path="notes.txt")
            for i, c in enumerate(clients)
        ]
        ready = [progress_until(c, r"is ready \((.*)\)").group(1) for c in clients]
        for client, msg_id in zip(clients, calls, strict=True):
            reply = client.response(msg_id)
            assert reply["result"]["content"] == "1: alpha", reply
        assert sorted(text.startswith("built in") for text in ready) == [False, True], ready
        assert "built meanwhile by another toold" in ready
        assert _tag_events(tag, since) == 1
    finally:
        for client in clients:
            client.close()
        for name in ("one", "two"):  # their engines keep a warm container each
            stop_engine(tmp_path / name)


def test_concurrent_ensure_image_builds_once(tag: str) -> None:
    start = threading.Barrier(4)
    built: list[bool] = []

    def build() -> None:
        client = connect(timeout=30)
        try:
            start.wait(timeout=10)
            built.append(ensure_image(tag, client))
        finally:
            client.close()

    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(built) == [False, False, False, True]


def test_an_image_of_other_inputs_is_rebuilt(workspace: Path, tag: str) -> None:
    client = connect(timeout=30)
    try:
        repository, version = tag.split(":")
        skeleton, _, _ = docker_image.build_plan()
        stale = [f"LABEL {RUNTIME_LABEL}=host {INPUTS_LABEL}=0000000000000000"]
        client.api.import_image_from_data(
            skeleton, repository=repository, tag=version, changes=stale
        )
        old = client.images.get(tag).id
        problem, outcomes, progress = _calls(workspace, _config(tag), 1)
        assert problem is None
        assert not outcomes[0].is_error, outcomes[0].content
        assert (
            progress[0]
            == f"building the Docker image {tag} offline (built by another toold version)"
        )
        current = client.images.get(tag)
        assert current.labels[INPUTS_LABEL] == inputs_hash()
        assert current.id != old
        assert old not in {image.id for image in client.images.list(all=True)}  # no dangling
    finally:
        client.close()


def test_an_image_removed_while_the_runner_runs_is_built_again(workspace: Path, tag: str) -> None:
    config = _config(tag)
    client = connect(timeout=30)

    async def scenario() -> tuple[list[Any], list[str]]:
        runner = make_runner(config, workspace)
        tools = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, config)).get_tools())
        heard: list[str] = []
        outcomes = []
        try:
            for _ in range(2):
                outcomes.append(await _read_notes(tools, runner, heard))
                # As `docker rmi` would, once the call's container has gone.
                await asyncio.to_thread(
                    wait_until,
                    lambda: not client.api.containers(all=True, filters={"ancestor": tag}),
                    "the call's container to go",
                )
                await asyncio.to_thread(client.images.remove, tag)
        finally:
            await runner.close()
        return outcomes, heard

    try:
        outcomes, heard = asyncio.run(scenario())
    finally:
        client.close()
    assert [o.content for o in outcomes] == ["1: alpha\n2: beta"] * 2
    assert [text for text in heard if text.startswith("building")] == [
        f"building the Docker image {tag} offline (first use)",
        f"building the Docker image {tag} offline (it was removed)",
    ]


def test_toold_version_is_an_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import toold

    before = inputs_hash()
    monkeypatch.setattr(toold, "__version__", toold.__version__ + ".post1")
    assert inputs_hash() != before


def test_a_failed_build_names_the_cause_and_is_not_retried_at_once(
    workspace: Path, tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real failure: the build lock is a symlink, which toold never follows.
    monkeypatch.setenv("TOOLD_STATE_DIR", str(tmp_path / "state"))
    lock = lock_path()
    lock.symlink_to(tmp_path / "elsewhere")
    _, outcomes, progress = _calls(workspace, _config(tag), 1)
    first = outcomes[0]
    assert first.is_error
    assert f"cannot build the Docker image {tag} (execution.docker_image)" in first.content
    assert f"PermissionError: Refusing toold state file {lock}" in first.content  # the cause
    assert f"python -m toold.sandbox.docker build-image --tag {tag}" in first.content
    assert progress == [f"building the Docker image {tag} offline (first use)"]

    async def twice() -> list[Any]:
        config = _config(tag)
        runner = make_runner(config, workspace)
        tools = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, config)).get_tools())
        heard: list[str] = []
        try:
            outcomes = []
            for _ in range(2):
                outcomes.append(await _read_notes(tools, runner, heard))
            outcomes.append(heard)
            return outcomes
        finally:
            await runner.close()

    failed, again, heard = asyncio.run(twice())
    assert failed.is_error and again.is_error
    assert again.content == failed.content  # the remembered failure, not a second build
    assert heard == [f"building the Docker image {tag} offline (first use)"]
    # Fixed (a new runner, as after a configuration change): the next call builds.
    lock.unlink()
    _, outcomes, _ = _calls(workspace, _config(tag), 1)
    assert not outcomes[0].is_error, outcomes[0].content
