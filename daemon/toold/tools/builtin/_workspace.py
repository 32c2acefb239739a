"""The base of tools that act inside the bound workspace."""

from __future__ import annotations

from pathlib import Path

from toold.config import TooldConfig
from toold.sandbox.paths import relative_posix, safe_path
from toold.tools.base import Tool


class WorkspaceTool(Tool):
    """A tool that needs the workspace from its runtime."""

    @property
    def workspace(self) -> Path:
        """The bound workspace root (resolved)."""
        if self.runtime is None:
            raise RuntimeError(
                f"{self.name} is not bound to a workspace: use get_handlers(workspace=...)"
            )
        return self.runtime.workspace

    @property
    def config(self) -> TooldConfig:
        """The workspace's configuration (defaults when unbound)."""
        return self.runtime.config if self.runtime is not None else TooldConfig()

    def resolve(self, path: str) -> Path:
        """safe_path against the workspace."""
        return safe_path(self.workspace, path)

    def relative(self, target: Path) -> str:
        """Workspace-relative posix path."""
        return relative_posix(self.workspace, target)
