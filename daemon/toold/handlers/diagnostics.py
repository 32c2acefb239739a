"""diagnostics/get: the language servers' current diagnostics; diagnostics/changed follows.

Every change of a file's diagnostics (after a tool call wrote it, or a pending answer that
came late) is pushed to the workspace's sessions as ``diagnostics/changed`` (bind wires
it: toold.diagnostics.step.wire).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toold.diagnostics.service import DiagnosticsService
from toold.diagnostics.step import service_for
from toold.diagnostics.survey import survey
from toold.errors import InvalidParams
from toold_protocol.models import DiagnosticsGetParams, DiagnosticsGetResult

if TYPE_CHECKING:
    from toold.rpc import Context


def _service(ctx: Context) -> DiagnosticsService:
    """The workspace's service (bind wired its changes to every session)."""
    return service_for(ctx.workspace.runtime, ctx.workspace.runner)


async def diagnostics_get(ctx: Context, params: DiagnosticsGetParams) -> DiagnosticsGetResult:
    """The diagnostics of a file, a folder or the workspace (InvalidParams outside it)."""
    try:
        found = await survey(_service(ctx), params.path)
    except PermissionError as exc:
        raise InvalidParams(f"path: {exc}") from None
    return DiagnosticsGetResult(
        diagnostics=found.diagnostics, pending=found.pending, checked=found.checked
    )
