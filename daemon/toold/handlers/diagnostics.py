"""diagnostics/get: the language servers' current diagnostics; diagnostics/changed follows.

The first diagnostics/get of a workspace also subscribes its sessions to
``diagnostics/changed``: every later change of a file's diagnostics (after a tool call
wrote it, or a pending answer that came late) is pushed to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toold.diagnostics.service import DiagnosticsService
from toold.diagnostics.step import service_for
from toold.diagnostics.survey import survey
from toold.errors import InvalidParams
from toold_protocol import names
from toold_protocol.models import DiagnosticsChanged, DiagnosticsGetParams, DiagnosticsGetResult

if TYPE_CHECKING:
    from toold.rpc import Context
    from toold.workspace import WorkspaceState


def _service(ctx: Context) -> DiagnosticsService:
    """The workspace's service, its changes pushed to the workspace's sessions."""
    state = ctx.workspace
    service = service_for(state.runtime, state.runner)
    if not any(getattr(listener, "state", None) is state for listener in service.listeners):
        service.listeners.append(_Pusher(state))
    return service


class _Pusher:
    """Sends each change as ``diagnostics/changed`` through the workspace's push."""

    def __init__(self, state: WorkspaceState) -> None:
        self.state = state

    def __call__(self, event: DiagnosticsChanged) -> None:
        self.state.push(names.DIAGNOSTICS_CHANGED, event.model_dump(mode="json", by_alias=True))


async def diagnostics_get(ctx: Context, params: DiagnosticsGetParams) -> DiagnosticsGetResult:
    """The diagnostics of a file, a folder or the workspace (InvalidParams outside it)."""
    try:
        found = await survey(_service(ctx), params.path)
    except PermissionError as exc:
        raise InvalidParams(f"path: {exc}") from None
    return DiagnosticsGetResult(
        diagnostics=found.diagnostics, pending=found.pending, checked=found.checked
    )
