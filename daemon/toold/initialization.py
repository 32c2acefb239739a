"""``initialize``'s initializationOptions: toold's own keys and toold.toml's sections.

toold's own keys are the wire contract's InitializationOptions (toold_protocol.models):
its field aliases name them and its types check them (strictly: ``"yes"`` is not
true). The configuration may come under ``config`` or with the same keys at the top
level (``{"execution": {"tool_runner": "bwrap"}}``); both are merged, ``config``
winning where they overlap. A key that is neither one of toold's options nor a
toold.toml section is refused by name (the server shows it in a
``window/showMessage``) and nothing of it applies; the keys that are known still
apply. What is inside a section is checked by ``load_config`` like toold.toml itself.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

import toold_protocol
from toold.config import TooldConfig
from toold.config_loading import merge_overrides

if TYPE_CHECKING:
    from toold_protocol.models import InitializationOptions

SECTIONS = tuple(TooldConfig.model_fields)
"""toold.toml's sections, accepted at the top level too."""
EXPECTED = {
    "workspace": "expected a folder path (string)",
    "executionEvents": "expected true or false",
    "config": "expected an object of toold.toml sections",
}
"""What each of toold's options must be, said when a value is refused."""


def options() -> tuple[str, ...]:
    """toold's own keys: the wire names of InitializationOptions' fields."""
    model = toold_protocol.InitializationOptions
    return tuple(f.alias or name for name, f in model.model_fields.items())


@dataclass
class ParsedOptions:
    """What the daemon takes from initializationOptions, and what it refused."""

    options: InitializationOptions
    overrides: dict[str, Any] | None = None
    """toold.toml sections from the top level and ``config``, merged."""
    problems: list[str] = field(default_factory=list)
    """One message per refused key: its name, why, and the fix."""


def parse_initialization_options(raw: Any) -> ParsedOptions:
    """Split ``raw`` into toold's options and configuration overrides; name every bad key."""
    model = toold_protocol.InitializationOptions
    if raw is None:
        return ParsedOptions(model())
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        problem = f"initializationOptions must be an object (got {kind}); nothing of it was applied"
        return ParsedOptions(model(), problems=[problem])
    own = options()
    problems: dict[str, str] = {}
    mine = {key: value for key, value in raw.items() if key in own}
    try:
        parsed = model.model_validate(mine, strict=True)
    except ValidationError as exc:
        for error in exc.errors():
            key = str(error["loc"][0])
            problems[key] = f"initializationOptions.{key}: {EXPECTED.get(key, error['msg'])}"
        parsed = model.model_validate(
            {k: v for k, v in mine.items() if k not in problems}, strict=True
        )
    top = {key: value for key, value in raw.items() if key in SECTIONS}
    for key in raw:
        if key not in own and key not in SECTIONS:
            problems[key] = _unknown(f"initializationOptions.{key}", key, own)
    result = ParsedOptions(parsed, problems=[problems[key] for key in raw if key in problems])
    if top or parsed.config:
        result.overrides = merge_overrides(top, parsed.config or {})
    return result


def _unknown(where: str, key: str, own: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, [*own, *SECTIONS], n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"{where}: unknown key, not applied; {hint}expected one of: {', '.join(own)} "
        f"or a toold.toml section ({', '.join(SECTIONS)})"
    )
