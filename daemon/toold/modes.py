"""SessionMode: one session's permission mode over its workspace's shared guard.

An engine serves many sessions on one workspace: editors, ``toold run``, ACP clients.
``permissions/setMode`` (or ACP's ``session/set_mode``) switches the mode of the session
that asked, never of the others: one editor's ``bypass`` must not loosen a CI run on the
same folder. A session with no mode of its own follows the workspace's
(``permissions.mode`` in toold.toml, reloaded as it changes).

The session's guard is a child of the workspace's: the same rules (built again when a
reload swaps them), the same audit and the same one "always allow / always deny"
memory; only the mode differs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toold.gateway import ToolGateway
    from toold.permissions.guard import Mode


class SessionMode:
    """The mode a session chose, and the gateway its calls go through."""

    def __init__(self) -> None:
        self.mode: Mode | None = None
        """The session's own mode; None: the workspace's."""
        self._narrowed: tuple[ToolGateway, ToolGateway] | None = None
        """(the workspace's gateway, this session's) for the current mode."""

    def gateway(self, shared: ToolGateway) -> ToolGateway:
        """The gateway this session's calls take: ``shared`` under the session's mode."""
        if self.mode is None:
            return shared
        if self._narrowed is None or self._outdated(shared):
            guard = shared.guard.child(mode=self.mode)
            self._narrowed = (shared, shared.narrowed(guard=guard))
        return self._narrowed[1]

    def _outdated(self, shared: ToolGateway) -> bool:
        """A reload swaps the workspace guard's rule lists whole: build the child again."""
        assert self._narrowed is not None
        mine, now = self._narrowed[1].guard, shared.guard
        return (
            self._narrowed[0] is not shared
            or mine.allow is not now.allow
            or mine.deny is not now.deny
            or mine.forbid is not now.forbid
        )

    def set(self, mode: Mode) -> None:
        """Switch this session to ``mode`` (its next call is judged under it)."""
        self.mode = mode
        self._narrowed = None
