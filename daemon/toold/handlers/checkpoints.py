"""checkpoints/list, checkpoints/diff, checkpoints/restore: undo what tool calls wrote."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from toold.errors import InsideToolCall, UnknownCheckpoint
from toold.permissions.guard import protected
from toold_protocol.models import (
    CheckpointIdParams,
    CheckpointInfo,
    CheckpointsDiffResult,
    CheckpointsListResult,
    CheckpointsRestoreParams,
    CheckpointsRestoreResult,
    EmptyParams,
)

if TYPE_CHECKING:
    from toold.checkpoints import CheckpointStore
    from toold.rpc import Context


def _store(ctx: Context) -> CheckpointStore:
    store = ctx.workspace.gateway.checkpoints
    if store is None:
        raise UnknownCheckpoint("this workspace keeps no checkpoints")
    return store


async def checkpoints_list(ctx: Context, params: EmptyParams) -> CheckpointsListResult:
    """Every checkpoint, oldest first."""
    entries = await asyncio.to_thread(_store(ctx).entries)
    return CheckpointsListResult.model_validate({"checkpoints": [c.public() for c in entries]})


async def checkpoints_diff(ctx: Context, params: CheckpointIdParams) -> CheckpointsDiffResult:
    """The diff from before the checkpoint's call to now (UnknownCheckpoint when none)."""
    diff = await asyncio.to_thread(_store(ctx).diff, params.id)
    return CheckpointsDiffResult(diff=diff)


async def checkpoints_restore(
    ctx: Context, params: CheckpointsRestoreParams
) -> CheckpointsRestoreResult:
    """Put the files back as they were before the checkpoint (the last one by default);
    CheckpointConflict names files changed outside toold, or toold's own configuration
    (toold.toml, .toold/), unless ``force``. Never from inside a tool call: a restore
    writes files past the guard, so it is the user's alone."""
    if ctx.from_tool:
        raise InsideToolCall(
            "checkpoints/restore from inside a tool call (an agent's command) is refused: "
            "undo from your editor or your own shell"
        )
    store = _store(ctx)
    checkpoint_id = params.id or await asyncio.to_thread(store.last_undoable)
    if checkpoint_id is None:
        raise UnknownCheckpoint("nothing to undo: no file-changing tool call is left to undo")
    done = await asyncio.to_thread(
        store.restore, checkpoint_id, "user", force=params.force, guarded=protected
    )
    return CheckpointsRestoreResult(
        restored=[f.path for f in done.files],
        checkpoint=CheckpointInfo.model_validate(done.public()),
    )
