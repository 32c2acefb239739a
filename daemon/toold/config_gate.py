"""What keeps a configuration change from taking effect by itself.

``ConfigGate`` and ``GatedGuard``: while the configuration toold started with is invalid,
every agent's call is refused (the user's own calls, and file calls that only read or
write toold.toml, still go through the guard as usual). ``Held``: a reload's changes that
loosen a protection, kept out until the user confirms them (WorkspaceState.reload).
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toold.config import CONFIG_FILE, TooldConfig
from toold.permissions.guard import PermissionGuard, Verdict
from toold.permissions.rules import PATH_FIELDS
from toold.tools.annotations import ToolAnnotations

REFUSED = "agent tools are refused until it is fixed"
MENDING = (
    "the user's own calls, and reading or editing toold.toml, still work; "
    "toold applies the file again as soon as it is saved valid"
)


@dataclass
class ConfigGate:
    """Why the configuration toold started with is invalid; None once a valid one applied."""

    problem: str | None = None


@dataclass
class GatedGuard(PermissionGuard):
    """A PermissionGuard that refuses every agent's call while the configuration is invalid.

    An invalid toold.toml (or editor settings) never means the defaults: the rules and
    the sandbox it asked for are unknown. Calls of the user (``origin="user"``) and file
    calls that only read or write toold.toml itself still go through the guard as usual,
    so the file can be mended; a valid reload opens the gate (WorkspaceState._apply_config).
    """

    gate: ConfigGate = field(default_factory=ConfigGate)
    """Shared with every child guard (subagents, teammates): one reload opens them all."""

    def refusal(
        self,
        tool: str,
        args: Any,
        origin: str,
        annotations: ToolAnnotations | None,
        paths: list[str] | None,
    ) -> Verdict | None:
        """An agent's call while the gate is shut (a hook's deny still comes first)."""
        problem = self.gate.problem
        if problem is None or origin == "user" or mends_config(args, annotations, paths):
            return None
        message = f"Refused: {problem}; {REFUSED} (reading and editing toold.toml still work)"
        return Verdict(False, "denied", f"invalid configuration: {problem}", message)

    def child(self, *, mode: Any = None, fail_closed: bool | None = None) -> PermissionGuard:
        """PermissionGuard.child, behind the same gate."""
        return gated(super().child(mode=mode, fail_closed=fail_closed), self.gate)


def gated(guard: PermissionGuard, gate: ConfigGate) -> GatedGuard:
    """``guard`` (every field of it) behind ``gate``."""
    kept = {f.name: getattr(guard, f.name) for f in dataclasses.fields(guard) if f.init}
    kept.pop("gate", None)
    return GatedGuard(**kept, gate=gate)


def mends_config(args: Any, annotations: ToolAnnotations | None, paths: list[str] | None) -> bool:
    """Whether a call only reads or writes toold.toml itself with a file tool (no shell, no
    code, nothing outside): what an agent may still do to help mend an invalid file."""
    if annotations is None or annotations.shell or annotations.runs_code:
        return False
    if annotations.searches_folder:
        return False  # a folder's search reads more than the file named
    if annotations.open_world or not (annotations.read_only or annotations.writes_path):
        return False
    named = list(paths or [])
    if isinstance(args, Mapping):
        named += [args[k] for k in PATH_FIELDS if isinstance(args.get(k), str)]
    return bool(named) and all(posixpath.normpath(path) == CONFIG_FILE for path in named)


@dataclass(frozen=True)
class Held:
    """A reload's loosening changes, applied only once the user confirms them."""

    config: TooldConfig
    """The whole configuration the reload asked for."""
    changes: tuple[str, ...]
    overrides: dict[str, Any] | None
    generation: int
    """The reload that held them: a later reload makes this answer moot."""

    @property
    def summary(self) -> str:
        """``toold.toml changed: permissions.mode default → bypass; new allow rule ...``."""
        return "toold.toml changed: " + "; ".join(self.changes)

    def asks_the_same(self, other: Held) -> bool:
        """Whether ``other`` (a later reload) would ask the very same question."""
        return (self.config, self.changes, self.overrides) == (
            other.config,
            other.changes,
            other.overrides,
        )
