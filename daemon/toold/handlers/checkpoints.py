"""checkpoints/list, checkpoints/diff, checkpoints/restore: undo what tool calls wrote."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from toold.diagnostics.report import noteworthy
from toold.diagnostics.step import delta_of, watch_files
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
    # The text of the files it may put back, for the diagnostics the restore changes: it
    # writes past the gateway, so the gateway's own diagnostics step never sees it.
    touched = await asyncio.to_thread(_paths_since, store, checkpoint_id)
    watch = await watch_files(ctx.workspace.runtime, ctx.workspace.runner, touched)
    done = await asyncio.to_thread(
        store.restore, checkpoint_id, "user", force=params.force, guarded=protected
    )
    restored = [f.path for f in done.files]
    delta = None if watch is None else await delta_of(watch, restored)
    return CheckpointsRestoreResult(
        restored=restored,
        checkpoint=CheckpointInfo.model_validate(done.public()),
        diagnostics=noteworthy(delta),
    )


def _paths_since(store: CheckpointStore, checkpoint_id: str) -> list[str]:
    """Every file named by ``checkpoint_id`` and the later checkpoints: at least what its
    restore puts back (an unknown id names none; the restore itself then refuses it)."""
    entries = store.entries()
    ids = [entry.id for entry in entries]
    if checkpoint_id not in ids:
        return []
    tail = entries[ids.index(checkpoint_id) :]
    return list(dict.fromkeys(f.path for entry in tail if not entry.undone for f in entry.files))
