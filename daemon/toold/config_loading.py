"""Loading the configuration: ``toold.toml`` at the workspace root, then the editor's
overrides (initializationOptions.config, workspace/didChangeConfiguration).

Unknown keys and wrong types are refused with the key's dotted name (an unknown key
with the one probably meant), so a typo never silently falls back to a default: at
start an invalid configuration refuses every agent's call until it is fixed
(toold.assembly.first_config), with its strictest reading applied meanwhile
(``strictest``); a reload that fails keeps the configuration in force. The schema
itself is toold.config's.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from toold.config import CONFIG_FILE, TooldConfig
from toold.errors import describe, dotted


class ConfigError(ValueError):
    """The configuration is invalid; the message names the source, the key and the fix."""

    def __init__(self, source: str, problems: list[str], data: dict[str, Any]) -> None:
        verb = "is" if source == CONFIG_FILE else "are"
        super().__init__(f"{source} {verb} invalid ({'; '.join(problems)})")
        self.source = source
        """``toold.toml``, or the editor's settings (SETTINGS)."""
        self.problems = problems
        self.data = data
        """What could be read of it (file and settings merged; {} when nothing could)."""


SETTINGS = "the editor's settings (initializationOptions or workspace/didChangeConfiguration)"
"""Where overrides come from, as an error names them."""


def merge_overrides(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` applied key by key (tables merged, other values replaced)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_overrides(out[key], value)
        else:
            out[key] = value
    return out


def load_config(workspace: Path, overrides: dict[str, Any] | None = None) -> TooldConfig:
    """Read ``toold.toml`` (if any) and apply ``overrides`` on top.

    ConfigError names what is wrong: the file when it is invalid by itself, else the
    editor's settings that made it so.
    """
    data = read_file(workspace)
    merged = merge_overrides(data, overrides) if overrides else data
    try:
        return TooldConfig.model_validate(merged)
    except ValidationError as exc:
        problems = config_problems(exc)
        if overrides:
            try:
                TooldConfig.model_validate(data)
            except ValidationError as own:
                problems = config_problems(own)
            else:
                raise ConfigError(SETTINGS, problems, merged) from None
        raise ConfigError(CONFIG_FILE, problems, merged) from None


def read_file(workspace: Path) -> dict[str, Any]:
    """``toold.toml``'s tables ({} when there is no file); ConfigError when it cannot be read."""
    path = workspace / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(CONFIG_FILE, [f"not valid TOML: {exc}"], {}) from None
    except OSError as exc:
        raise ConfigError(CONFIG_FILE, [f"cannot be read: {exc.strerror or exc}"], {}) from None


def config_problems(exc: ValidationError) -> list[str]:
    """``key: what is wrong`` per error; an unknown key says which one was probably meant."""
    problems = []
    for err in exc.errors(include_url=False):
        where = dotted(err["loc"])
        if err["type"] == "extra_forbidden":
            problems.append(f"{where}: {_unknown_key(err['loc'])}")
        else:
            problems.append(f"{where}: {describe(err, show_input=False)}")
    return problems


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    model = _model_at(loc[:-1])
    known = list(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; expected one of: {', '.join(known)}"


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The section (or hook) model that the key at ``loc`` belongs to."""
    model: type[BaseModel] | None = TooldConfig
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list of tables ([[hooks.pre_tool_use]])
        field = model.model_fields.get(part) if model is not None else None
        model = _model_in(field.annotation) if field is not None else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


STRICT_EXECUTION = ("tool_runner", "docker_image", "docker_cpus", "docker_memory", "pids_limit")
"""Keys of [execution] an invalid configuration still applies, each one valid by itself:
the sandbox it asks for. ``network`` and ``env_passthrough`` stay off (their defaults)."""
STRICT_PERMISSIONS = ("deny", "forbid")
"""Keys of [permissions] an invalid configuration still applies: rules that only refuse."""


def strictest(data: dict[str, Any]) -> TooldConfig:
    """The strictest reading of an invalid configuration: the defaults, plus the sandbox
    and the refusing rules it names, each key kept only when it is valid by itself."""
    kept: dict[str, dict[str, Any]] = {}
    for section, keys in (("execution", STRICT_EXECUTION), ("permissions", STRICT_PERMISSIONS)):
        table = data.get(section)
        model = TooldConfig.model_fields[section].annotation
        if not isinstance(table, dict) or model is None:
            continue
        for key in keys:
            if key not in table:
                continue
            try:
                model.model_validate({key: table[key]})
            except ValidationError:
                continue
            kept.setdefault(section, {})[key] = table[key]
    return TooldConfig.model_validate(kept)
