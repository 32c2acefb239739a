"""``initialize``'s initializationOptions: toold's own keys and toold.toml's sections.

The configuration may come under ``config`` or with the same keys at the top level
(``{"execution": {"tool_runner": "bwrap"}}``); both are merged, ``config`` winning
where they overlap. A key that is neither one of toold's options nor a toold.toml
section is refused by name (the server shows it in a ``window/showMessage``) and
nothing of it applies; the keys that are known still apply. What is inside a
section is checked by ``load_config`` like toold.toml itself.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from toold.config import TooldConfig, merge_overrides

OPTIONS = ("workspace", "config", "executionEvents")
"""toold's own keys (protocol's InitializationOptions)."""
SECTIONS = tuple(TooldConfig.model_fields)
"""toold.toml's sections, accepted at the top level too."""


@dataclass
class InitializationOptions:
    """What the daemon takes from initializationOptions, and what it refused."""

    workspace: str | None = None
    overrides: dict[str, Any] | None = None
    execution_events: bool = False
    problems: list[str] = field(default_factory=list)
    """One message per refused key: its name, why, and the fix."""


def parse_initialization_options(raw: Any) -> InitializationOptions:
    """Split ``raw`` into toold's options and configuration overrides; name every bad key."""
    parsed = InitializationOptions()
    if raw is None:
        return parsed
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        parsed.problems.append(
            f"initializationOptions must be an object (got {kind}); nothing of it was applied"
        )
        return parsed
    top: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"initializationOptions.{key}"
        if key == "workspace":
            if isinstance(value, str):
                parsed.workspace = value
            elif value is not None:
                parsed.problems.append(f"{where}: expected a folder path (string)")
        elif key == "executionEvents":
            if isinstance(value, bool):
                parsed.execution_events = value
            else:
                parsed.problems.append(f"{where}: expected true or false")
        elif key == "config":
            if isinstance(value, dict):
                nested = value
            elif value is not None:
                parsed.problems.append(f"{where}: expected an object of toold.toml sections")
        elif key in SECTIONS:
            top[key] = value
        else:
            parsed.problems.append(_unknown(where, key))
    if top or nested:
        parsed.overrides = merge_overrides(top, nested)
    return parsed


def _unknown(where: str, key: str) -> str:
    close = difflib.get_close_matches(key, [*OPTIONS, *SECTIONS], n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"{where}: unknown key, not applied; {hint}expected one of: {', '.join(OPTIONS)} "
        f"or a toold.toml section ({', '.join(SECTIONS)})"
    )
