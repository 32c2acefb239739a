"""ToolAnnotations: what a tool does and how the guard treats it, declared on the tool.

The first four are MCP's ToolAnnotations hints (``readOnlyHint`` ...), with MCP's
defaults: a tool that says nothing may change things, destroy things and reach the
outside world. The next five are the permission guard's:

- ``confirm`` — ``"never"``: runs unasked in every mode, plan mode too (a deny rule
  still stops it); ``"ask"``: the mode and the allow rules decide, else the user is
  asked; ``"always"``: asks even when an allow rule covers it (bypass mode runs it).
- ``writes_path`` — its ``file_path``/``path`` argument names a file it writes, so the
  guard refuses toold.toml and .toold/ there (the guard could be loosened otherwise).
- ``runs_code`` — its arguments are code the guard cannot judge; naming toold's own
  files in it asks.
- ``shell`` — its ``command`` argument is a shell line: the guard parses it, judges each
  command in it, and ``tool(...)`` rules match every command (``bash(git push*)``).
- ``searches_folder`` — its ``path`` argument is a folder it searches: a deny rule
  covering that folder or anything below it denies the search.

The last, ``agents``, says which agents get the tool: ``"all"`` (subagents too),
``"team"`` (the main loop and its teammates) or ``"lead"`` (the main loop only).

Every reader takes them from here: the guard, the agent types (read-only subagents get
the read-only tools that never ask), tools/list (``annotations``, camelCase) and the MCP
bridge. A user's own tool without annotations gets the defaults: the guard asks. (Rules
name tools, so a rule naming a builtin is read as that builtin's rules are, whichever
tool now carries the name: see toold.permissions.rules.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

Confirm = Literal["never", "ask", "always"]
Agents = Literal["all", "team", "lead"]


@dataclass(frozen=True)
class ToolAnnotations:
    """A tool's behaviour and risk (MCP's hints) and its treatment by the guard."""

    read_only: bool = False
    """It changes nothing in its environment (MCP ``readOnlyHint``)."""
    destructive: bool = True
    """It may delete or overwrite, when not read-only (MCP ``destructiveHint``)."""
    idempotent: bool = False
    """Calling it again with the same arguments changes nothing more (MCP ``idempotentHint``)."""
    open_world: bool = True
    """It reaches beyond the workspace: the network, other processes (MCP ``openWorldHint``)."""
    confirm: Confirm = "ask"
    """When the guard asks the user: never, as the mode and rules say, or always."""
    writes_path: bool = False
    """Its ``file_path``/``path`` argument is a file it writes."""
    runs_code: bool = False
    """Its arguments are code (the guard checks they do not name toold's own files)."""
    shell: bool = False
    """Its ``command`` argument is a shell line the guard parses and rules match per command."""
    searches_folder: bool = False
    """Its ``path`` argument is a folder it searches (a deny rule below it denies the search)."""
    agents: Agents = "all"
    """Who gets it: every agent, the main loop and its teammates, or the main loop only."""

    @property
    def safe(self) -> bool:
        """Whether the guard lets it run unasked (plan mode included)."""
        return self.confirm == "never"

    def wire(self) -> dict[str, Any]:
        """tools/list's ``annotations`` object (camelCase, MCP's hint names)."""
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
            "confirm": self.confirm,
            "writesPath": self.writes_path,
            "runsCode": self.runs_code,
        }


READS = ToolAnnotations(
    read_only=True, destructive=False, idempotent=True, open_world=False, confirm="never"
)
"""A tool that only reads the workspace or toold's own state: never asks."""

SEARCHES = replace(READS, searches_folder=True)
"""A read-only search of the folder its ``path`` argument names: never asks."""

WRITES_FILE = ToolAnnotations(open_world=False, confirm="always", writes_path=True)
"""A tool that writes the file its path argument names: always asks."""

SHELL = ToolAnnotations(shell=True)
"""A tool that runs its ``command`` argument as a shell line: the guard parses it."""
