"""todos/list, tasks/list, skills/list: the state editors show in their views."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from toold_protocol.models import (
    EmptyParams,
    SkillsListResult,
    TasksListParams,
    TasksListResult,
    TodosListResult,
)

if TYPE_CHECKING:
    from toold.rpc import Context
    from toold.workspace import WorkspaceState

WATCH_WAIT_S = 2.0


async def _watched(state: WorkspaceState) -> None:
    """Answer a view only once outside changes are watched: an edit made after the
    answer then always arrives as a notification (bounded, should watching fail)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(state.watching.wait(), WATCH_WAIT_S)


async def todos_list(ctx: Context, params: EmptyParams) -> TodosListResult:
    """The session's TODO items."""
    return TodosListResult.model_validate({"todos": ctx.workspace.todos.items()})


async def tasks_list(ctx: Context, params: TasksListParams) -> TasksListResult:
    """Persistent tasks with their ready flag; a corrupt file is an error naming the fix."""
    tasks = ctx.workspace.tasks
    await _watched(ctx.workspace)
    await asyncio.to_thread(tasks.list)  # TaskStoreError for a corrupt file
    wanted = [t for t in tasks.snapshot() if params.status is None or t["status"] == params.status]
    return TasksListResult.model_validate({"tasks": wanted})


async def skills_list(ctx: Context, params: EmptyParams) -> SkillsListResult:
    """Every skill found."""
    await _watched(ctx.workspace)
    skills = await asyncio.to_thread(ctx.workspace.skills.list)
    return SkillsListResult.model_validate({"skills": skills})
