"""A refused loosening stays refused: the user's answer outlives the daemon.

When the user keeps the current configuration over a loosening toold.toml (answers Keep
current, or nothing), toold remembers the file's content by its SHA-256, with the
configuration then in force (the last the user accepted), in the user's state folder
(toold.user_state: outside the workspace, out of an agent's reach), keyed by the
workspace's path. At the next start, a toold.toml with a refused hash is not applied as
it is: its loosening changes are held against that remembered configuration (as a
reload would, toold.permissions.loosening.hold_back), everything else applies, and the
user is told. Saving the file again asks again; Apply forgets the refusal.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toold.config import CONFIG_FILE, TooldConfig
from toold.permissions.loosening import chosen_keys, hold_back
from toold.sandbox.paths import open_in_workspace
from toold.user_state import (
    UserStateError,
    read_private,
    state_dir,
    workspace_name,
    write_private,
)

log = logging.getLogger(__name__)

FOLDER = "refused-config"
MAX_REMEMBERED = 32
"""Refused contents kept per workspace, newest last; older ones are forgotten."""
MAX_CONFIG_BYTES = 1 << 20


def config_digest(root: Path) -> str | None:
    """SHA-256 of toold.toml's bytes as they are now (None: no such file, or unreadable)."""
    try:
        fd = open_in_workspace(root, CONFIG_FILE, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return hashlib.sha256(fh.read(MAX_CONFIG_BYTES + 1)).hexdigest()


def _record_path(root: Path) -> Path:
    return state_dir() / FOLDER / f"{workspace_name(root)}.json"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = path.with_suffix(".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _refused(path: Path, root: Path) -> dict[str, Any]:
    """digest → the configuration kept over it; UserStateError when damaged."""
    data = read_private(path)
    if data is None:
        return {}
    try:
        record = json.loads(data)
        refused = record["refused"]
        if record["workspace"] != os.fspath(root) or not isinstance(refused, dict):
            raise ValueError("not this workspace's")
    except (ValueError, KeyError, TypeError) as exc:
        raise UserStateError(f"{path} is damaged ({exc}): remove it") from None
    return refused


def remember_refusal(root: Path, kept: TooldConfig) -> None:
    """The user kept ``kept`` over toold.toml as it is now: refuse its content at start."""
    digest = config_digest(root)
    if digest is None:
        return
    try:
        path = _record_path(root)
        with _locked(path):
            try:
                refused = _refused(path, root)
            except UserStateError:
                refused = {}  # rewritten whole: the answer just given is what counts
            refused.pop(digest, None)
            refused[digest] = kept.model_dump(mode="json")
            newest = dict(list(refused.items())[-MAX_REMEMBERED:])
            record = {"workspace": os.fspath(root), "refused": newest}
            write_private(path, json.dumps(record, indent=1).encode("utf-8"))
    except OSError as exc:
        log.warning("cannot remember the refused toold.toml: %s", exc)


def forget_refusal(root: Path) -> None:
    """The user applied toold.toml as it is now: its content is no longer refused."""
    digest = config_digest(root)
    if digest is None:
        return
    try:
        path = _record_path(root)
        with _locked(path):
            refused = _refused(path, root)
            if refused.pop(digest, None) is not None:
                record = {"workspace": os.fspath(root), "refused": refused}
                write_private(path, json.dumps(record, indent=1).encode("utf-8"))
    except OSError as exc:
        log.warning("cannot forget the refused toold.toml: %s", exc)


def hold_refused(
    root: Path, config: TooldConfig, overrides: dict[str, Any] | None
) -> tuple[TooldConfig, str | None]:
    """The configuration to start with: ``config`` (read from toold.toml) with the
    loosening the user refused held back, and what to tell the user (None: nothing held).

    A record that cannot be read fails closed: the loosening is held against the
    defaults, and the message names the file.
    """
    digest = config_digest(root)
    if digest is None:
        return config, None
    problem = ""
    try:
        kept_data = _refused(_record_path(root), root).get(digest)
        if kept_data is None:
            return config, None
        kept = TooldConfig.model_validate(kept_data)
    except (OSError, ValidationError) as exc:
        problem = f" (the record of refused contents cannot be used: {exc}; held against the "
        problem += "defaults)"
        kept = TooldConfig()
    applied, held = hold_back(kept, kept.permissions.mode, config, chosen_keys(overrides))
    if not held:
        return config, None
    message = (
        f"toold.toml holds changes you refused (Keep current): {'; '.join(held)}. Not applied"
        f"{problem}; to apply them, save toold.toml again and answer Apply, switch the mode "
        "from the editor (permissions/setMode), or send the settings from the editor "
        "(didChangeConfiguration)"
    )
    return applied, message
