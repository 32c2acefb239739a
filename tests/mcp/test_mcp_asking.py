"""``toold mcp`` on both MCP revisions, asking the user, and background jobs as tasks:
a real ``toold mcp`` subprocess driven by the mcp SDK's own Client (stdio), with its
elicitation callback standing in for the user."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.client.context import ClientRequestContext
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from tests.mcp.http_process import toold_http
from tests.mcp.reading import audit, text
from tests.mcp.stdio import toold_mcp

MODERN: Literal["2026-07-28"] = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


class User:
    """The elicitation callback: answers from a script, and what it was asked."""

    def __init__(self, *answers: dict[str, Any] | str) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params)
        answer = self.answers.pop(0)
        if answer == "late":  # answers after [permissions] ask_timeout
            await asyncio.sleep(2.5)
        if answer in ("decline", "cancel"):
            return types.ElicitResult(action=answer)
        content = answer if isinstance(answer, dict) else {"answer": answer}
        return types.ElicitResult(action="accept", content=content)


@asynccontextmanager
async def client(
    workspace: Path, mode: Literal["legacy", "auto", "2026-07-28"], user: User | None = None
) -> AsyncIterator[Client]:
    """The SDK's Client on ``toold mcp`` for ``workspace``, in ``mode``."""
    server = toold_mcp(workspace)
    async with Client(
        server, mode=mode, elicitation_callback=user, extensions=[TasksClient()]
    ) as connected:
        yield connected


def write(name: str) -> dict[str, Any]:
    return {"file_path": name, "content": f"{name}\n"}


def test_both_revisions_discover_lists_them_and_no_elicitation_is_refused(
    workspace: Path,
) -> None:
    async def main() -> tuple[Any, ...]:
        async with client(workspace, "legacy") as old:
            legacy = old.session.protocol_version
            await old.list_tools()
        async with client(workspace, "auto") as new:
            modern = new.session.protocol_version
            found = await new.session.send_discover(MODERN)
            listed = await new.list_tools()
            read = await new.call_tool("glob", {"pattern": "*"})
            # No elicitation declared: the refusal, with how to allow the call (on the
            # handshake revisions: test_mcp_bridge's test_the_guard_refuses_write_file...)
            refused = await new.call_tool("write_file", write("canary"))
        return legacy, modern, found["supportedVersions"], (found, listed, read, refused)

    legacy, modern, supported, (found, listed, read, refused) = asyncio.run(main())
    assert (legacy, modern) == ("2025-11-25", MODERN)
    assert supported == [*HANDSHAKE_PROTOCOL_VERSIONS, MODERN]
    assert found["capabilities"]["extensions"] == {TASKS: {}}
    assert "write_file" in {t.name for t in listed.tools}
    assert not read.is_error
    assert refused.is_error and not (workspace / "canary").exists()
    assert text(refused).startswith("Denied: write_file needs the user's confirmation")
    assert 'mode = "bypass"' in text(refused)


def test_elicitation_allow_deny_decline_invalid_then_always(workspace: Path) -> None:
    user = User("allow", "deny", "decline", {"answer": "yes please"}, "always")

    async def main() -> list[types.CallToolResult]:
        async with client(workspace, "legacy", user) as c:
            return [await c.call_tool("write_file", write(f"f{i}.txt")) for i in range(6)]

    results = asyncio.run(main())
    assert len(user.asked) == 5  # the sixth ran on the "Always allow" of the fifth
    question = user.asked[0]
    assert isinstance(question, types.ElicitRequestFormParams)
    assert question.message.startswith("toold: the agent wants to run write_file {")
    assert "(write_file always asks). Allow it?" in question.message
    assert "+++ b/f0.txt" in question.message and "+f0.txt" in question.message
    choices = question.requested_schema["properties"]["answer"]["oneOf"]
    assert [c["title"] for c in choices] == ["Allow", "Always allow", "Deny"]
    ran = [(workspace / f"f{i}.txt").exists() for i in range(6)]
    assert ran == [True, False, False, False, True, True]
    assert [r.is_error for r in results] == [False, True, True, True, False, False]
    assert (
        text(results[1])
        == "Denied: write_file was not allowed (user denied (write_file always asks))."
    )
    assert text(results[2]).startswith("Denied: write_file was not allowed (no answer")
    calls = [e for e in audit(workspace) if e["tool"] == "write_file"]
    assert [e["decision"] for e in calls] == [
        "user-allowed",
        "denied",
        "denied",
        "denied",
        "always-allowed",
        "allowed",
    ]
    assert calls[-1]["rule"] == "write_file"  # the memory "Always allow" added, reused


def test_deny_cancel_and_no_answer_in_time_refuse_a_shell_command(workspace: Path) -> None:
    (workspace / "toold.toml").write_text("[permissions]\nask_timeout = 1\n", encoding="utf-8")
    user = User("deny", "cancel", "late")

    async def main() -> list[types.CallToolResult]:
        async with client(workspace, "legacy", user) as c:
            return [await c.call_tool("bash", {"command": "touch canary"}) for _ in range(3)]

    results = asyncio.run(main())
    assert len(user.asked) == 3 and all(r.is_error for r in results)
    assert "(shell command). Allow it?" in user.asked[0].message
    assert not (workspace / "canary").exists()
    reasons = [e["reason"] for e in audit(workspace) if e["tool"] == "bash"]
    assert reasons == ["user denied (shell command)", *["no answer (shell command)"] * 2]


def test_input_required_round_trip_allow_and_deny(workspace: Path) -> None:
    user = User("allow", "deny")

    async def main() -> list[types.CallToolResult]:
        async with client(workspace, MODERN, user) as c:
            assert c.session.protocol_version == MODERN
            return [await c.call_tool("write_file", write(n)) for n in ("yes.txt", "no.txt")]

    allowed, denied = asyncio.run(main())
    assert len(user.asked) == 2
    assert "+++ b/yes.txt" in user.asked[0].message
    assert not allowed.is_error and (workspace / "yes.txt").read_text() == "yes.txt\n"
    assert denied.is_error and not (workspace / "no.txt").exists()
    assert text(denied).startswith("Denied: write_file was not allowed (user denied")


def test_input_responses_toold_did_not_ask_for_are_refused(workspace: Path) -> None:
    allow = types.ElicitResult(action="accept", content={"answer": "allow"})

    async def refused(c: Client, **kw: Any) -> MCPError:
        with pytest.raises(MCPError) as raised:
            await c.session.call_tool(
                "write_file", write("canary"), allow_input_required=True, **kw
            )
        return raised.value

    async def main() -> list[MCPError]:
        async with client(workspace, MODERN, User()) as c:
            first = await c.session.call_tool(
                "write_file", write("canary"), allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            assert first.input_requests is not None and first.request_state is not None
            (key,) = first.input_requests
            other = await c.session.call_tool(
                "write_file", write("other"), allow_input_required=True
            )
            assert isinstance(other, types.InputRequiredResult)
            errors = [
                await refused(c, input_responses={"toold-ask-guess": allow}),  # no state
                await refused(c, input_responses={key: allow}, request_state="v1.forged"),
                # another call's state: bound to its arguments by the SDK's seal
                await refused(c, input_responses={key: allow}, request_state=other.request_state),
                # the right state, an answer to a question not asked
                await refused(
                    c, input_responses={"toold-ask-guess": allow}, request_state=first.request_state
                ),
                # the state was used by the refusal above: a replay answers nothing
                await refused(c, input_responses={key: allow}, request_state=first.request_state),
            ]
        return errors

    errors = asyncio.run(main())
    assert all(e.code == types.INVALID_PARAMS for e in errors)
    assert "no question toold asked" in errors[0].message
    assert not (workspace / "canary").exists() and not (workspace / "other").exists()


class TaskParams(types.RequestParams):
    """The params of tasks/get and tasks/cancel."""

    task_id: str


async def task_call(session: Any, method: str, task_id: str) -> dict[str, Any]:
    """tasks/get or tasks/cancel through the SDK's session (its envelope stamped)."""
    request = types.Request[TaskParams, str](method=method, params=TaskParams(task_id=task_id))
    answer: dict[str, Any] = await session.send_request(request, TypeAdapter(dict[str, Any]))
    return answer


class CreatedTask(types.Result):
    """The extension's CreateTaskResult."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    ttl_ms: int | None


async def finished(task: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    """Poll tasks/get until the task ends: its result, as the extension's clients do."""
    task_id = task.task_id
    while (got := await task_call(ctx.session, "tasks/get", task_id))["status"] == "working":
        await asyncio.sleep(0.05)
    return types.CallToolResult.model_validate(got["result"])


class TasksClient(ClientExtension):
    """A client of the tasks extension: declares it, and resolves task handles."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=finished)]


def test_background_jobs_are_tasks_get_and_cancel(workspace: Path) -> None:
    async def main() -> dict[str, Any]:
        async with client(workspace, MODERN) as c:
            slow = await c.session.call_tool(
                "background_run", {"command": "sleep 30"}, allow_claimed=True
            )
            assert isinstance(slow, CreatedTask)
            slow_id = slow.task_id
            running = await task_call(c.session, "tasks/get", slow_id)
            cancelled = await task_call(c.session, "tasks/cancel", slow_id)
            with pytest.raises(MCPError) as unknown:
                await task_call(c.session, "tasks/get", "no-such-job")
            return {
                "created": slow,
                "running": running,
                "cancelled": cancelled,
                "after": await task_call(c.session, "tasks/get", slow_id),
                # Client.call_tool resolves the handle through tasks/get (finished above)
                "done": await c.call_tool("background_run", {"command": "echo from-the-job"}),
                "unknown": unknown.value,
            }

    got = asyncio.run(main())
    assert got["created"].status == "working" and got["created"].ttl_ms is None
    assert got["running"]["status"] == "working" and got["running"]["pollIntervalMs"] > 0
    assert got["cancelled"]["resultType"] == "complete"
    assert got["after"]["status"] == "cancelled"
    done = got["done"]
    assert not done.is_error and "from-the-job" in text(done)
    assert got["unknown"].code == types.INVALID_PARAMS


def test_asking_over_streamable_http_on_both_revisions(workspace: Path) -> None:
    user = User("allow", "deny")

    async def main(url: str) -> list[types.CallToolResult]:
        out = []
        for mode, name in (("legacy", "yes.txt"), (MODERN, "no.txt")):
            async with Client(url, mode=mode, elicitation_callback=user) as c:
                out.append(await c.call_tool("write_file", write(name)))
        return out

    with toold_http(workspace, "--no-token") as server:
        allowed, denied = asyncio.run(main(server.url))
        assert server.stop() == 0
    assert len(user.asked) == 2
    assert not allowed.is_error and (workspace / "yes.txt").exists()
    assert denied.is_error and not (workspace / "no.txt").exists()
