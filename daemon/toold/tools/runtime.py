"""The runtime objects get_handlers() binds into tools."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toold.config import TooldConfig


@dataclass
class ToolRuntime:
    """Everything a bound tool may need. Managers left as None make their tools
    answer with the spec's "unavailable" text."""

    workspace: Path
    config: TooldConfig = field(default_factory=TooldConfig)
    todos: Any = None
    tasks: Any = None
    skills: Any = None
    background: Any = None
    team: Any = None
    provider: Any = None
    guard: Any = None
    login_environment: Any = None
    """The local runner's bash environment (a LoginEnvironment); None elsewhere, so a
    sandbox worker's bash keeps its allow-listed environment."""

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).resolve()

    @functools.cached_property
    def local_filesystem(self) -> bool:
        """Whether the workspace lies on a local disk or in memory (not NFS, SMB, FUSE)."""
        from toold.sandbox.paths import LOCAL_FILESYSTEMS, filesystem_type

        return filesystem_type(self.workspace) in LOCAL_FILESYSTEMS
