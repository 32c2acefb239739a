"""ToolRuntime: the workspace objects a bound tool may use."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toold.config import TooldConfig
from toold.tools.filestate import FileTracker

if TYPE_CHECKING:
    from toold.agents.system import AgentSystem
    from toold.jobs.manager import BackgroundManager
    from toold.planning.skills import SkillLoader
    from toold.planning.tasks import TaskManager
    from toold.planning.todos import TodoManager
    from toold.team.manager import TeamManager
    from toold.tools.builtin._login_shell import LoginEnvironment


@dataclass
class ToolRuntime:
    """Everything a bound tool may need. A manager left as None makes its tools
    answer with the spec's "unavailable" text (a sandbox worker binds none)."""

    workspace: Path
    config: TooldConfig = field(default_factory=TooldConfig)
    todos: TodoManager | None = None
    tasks: TaskManager | None = None
    skills: SkillLoader | None = None
    background: BackgroundManager | None = None
    team: TeamManager | None = None
    agents: AgentSystem | None = None
    """Subagents (the ``subagent`` tool); built from the workspace, so bound after it."""
    login_environment: LoginEnvironment | None = None
    """The local runner's bash environment; None elsewhere, so a sandbox worker's bash
    keeps its allow-listed environment."""

    files: FileTracker = field(init=False)
    """What this workspace's agents have read or written (the stale-file guard; the
    gateway checks and records it, so it holds whichever runner runs the tool)."""

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).resolve()
        self.files = FileTracker(self.workspace)

    @functools.cached_property
    def local_filesystem(self) -> bool:
        """Whether the workspace lies on a local disk or in memory (not NFS, SMB, FUSE)."""
        from toold.sandbox.paths import LOCAL_FILESYSTEMS, filesystem_type

        return filesystem_type(self.workspace) in LOCAL_FILESYSTEMS
