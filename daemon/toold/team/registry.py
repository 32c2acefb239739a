"""TeamRegistry: teammates registered in ``.team.json`` at the workspace root."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from toold.storage import atomic_write_text, file_lock, read_state

TEAM_FILE = ".team.json"
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def check_teammate_name(name: object) -> str:
    """``name`` when it is a valid teammate name (it names files), else ValueError."""
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 128:
        raise ValueError(f"Invalid teammate name: {name!r} (use letters, digits, _ and -)")
    return name


class TeamRegistry:
    """``{"teammates": {name: {name, role, system_prompt, provider_config}}}``.

    Writes are atomic and serialised by a lock shared with other daemons.
    """

    def __init__(self, path: Path, lock_path: Path) -> None:
        self.path = path
        self.lock_path = lock_path

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(read_state(self.path).decode("utf-8"))  # never through a link
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ValueError(f"{TEAM_FILE} is not valid JSON ({exc}); fix or remove it") from None
        teammates = data.get("teammates") if isinstance(data, dict) else None
        if not isinstance(teammates, dict):
            raise ValueError(f'{TEAM_FILE} must hold {{"teammates": {{...}}}}; fix or remove it')
        for key, entry in teammates.items():
            # Names become file names (mailboxes, run locks): checked here, where they are read.
            problem = None
            if not isinstance(key, str) or not _NAME.match(key) or len(key) > 128:
                problem = "is not a valid name (letters, digits, _ and -)"
            elif not isinstance(entry, dict) or entry.get("name") != key:
                problem = "needs an object whose 'name' is its key"
            elif not isinstance(entry.get("role", ""), str):
                problem = "needs 'role' as a string"
            if problem:
                raise ValueError(f"{TEAM_FILE}: teammate {key!r} {problem}; fix or remove it")
        return teammates

    def register(
        self, name: str, role: str, system_prompt: str = "", model: str | None = None
    ) -> dict[str, Any]:
        """Add or replace a teammate."""
        check_teammate_name(name)
        if name == "main":
            raise ValueError("'main' is the user's own agent; choose another name")
        entry = {
            "name": name,
            "role": role,
            "system_prompt": system_prompt,
            "provider_config": {"model": model} if model else {},
        }
        with file_lock(self.lock_path):
            teammates = self._read()
            teammates[name] = entry
            text = json.dumps({"teammates": teammates}, indent=2, ensure_ascii=False) + "\n"
            atomic_write_text(self.path, text)
        return dict(entry)

    def get(self, name: str) -> dict[str, Any]:
        """One teammate; ValueError ``Unknown teammate: X``."""
        found = self._read().get(name)
        if found is None:
            raise ValueError(f"Unknown teammate: {name}")
        return dict(found)

    def all(self) -> list[dict[str, Any]]:
        """Every teammate, by name."""
        teammates = self._read()
        return [dict(teammates[n]) for n in sorted(teammates)]
