"""Configuration: ``toold.toml`` at the workspace root, then initializationOptions.config.

Unknown keys and wrong types are refused with the key's dotted name, so a typo
never silently falls back to a default.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toold_protocol.errors import MAX_MESSAGE_BYTES

CONFIG_FILE = "toold.toml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ExecutionConfig(_Section):
    tool_runner: Literal["local", "subprocess", "bwrap", "docker"] = "local"
    """Where tools run: in the daemon, a worker process, bubblewrap or Docker."""


class LimitsConfig(_Section):
    bash_output_chars: int = Field(30_000, ge=1_000)
    """Shell output kept per call; head and tail survive around a marker."""
    max_file_size: int = Field(1_048_576, ge=1)
    """Largest file read_file reads whole, in bytes."""
    max_message_bytes: int = Field(MAX_MESSAGE_BYTES, ge=1024)
    """Largest JSON-RPC frame the daemon accepts."""
    grep_max_matches: int = Field(1000, ge=1)
    """Matches grep returns at most."""


class TooldConfig(_Section):
    """The whole configuration; every section optional."""

    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and the fix."""


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(workspace: Path, overrides: dict[str, Any] | None = None) -> TooldConfig:
    """Read ``toold.toml`` (if any) and apply ``overrides`` on top."""
    data: dict[str, Any] = {}
    path = workspace / CONFIG_FILE
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if overrides:
        data = _merge(data, overrides)
    try:
        return TooldConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"invalid configuration ({path.name}): {problems}") from None
