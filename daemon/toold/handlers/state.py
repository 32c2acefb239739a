"""todos/list, tasks/list, skills/list: the state editors show in their views."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pygls.exceptions import JsonRpcException

from toold_protocol import errors
from toold_protocol.models import (
    EmptyParams,
    SkillsListResult,
    TasksListParams,
    TasksListResult,
    TodosListResult,
)

if TYPE_CHECKING:
    from toold.server import TooldServer


async def todos_list(server: TooldServer, params: EmptyParams) -> TodosListResult:
    """The session's TODO items."""
    return TodosListResult.model_validate({"todos": server.state.todos.items()})


async def tasks_list(server: TooldServer, params: TasksListParams) -> TasksListResult:
    """Persistent tasks with their ready flag; a corrupt file is an error naming the fix."""
    import asyncio

    from toold.planning.tasks import TaskStoreError

    tasks = server.state.tasks
    try:
        await asyncio.to_thread(tasks.list)
    except TaskStoreError as exc:
        raise JsonRpcException(str(exc), code=errors.INTERNAL_ERROR) from None
    wanted = [t for t in tasks.snapshot() if params.status is None or t["status"] == params.status]
    return TasksListResult.model_validate({"tasks": wanted})


async def skills_list(server: TooldServer, params: EmptyParams) -> SkillsListResult:
    """Every skill found."""
    import asyncio

    skills = await asyncio.to_thread(server.state.skills.list)
    return SkillsListResult.model_validate({"skills": skills})
