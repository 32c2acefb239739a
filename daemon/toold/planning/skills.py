"""SkillLoader: ``<dir>/<name>/SKILL.md``, searched in BAREAGENT_SKILLS_DIR, .toold/skills,
then the skills bundled with toold."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BUNDLED_SKILLS = Path(__file__).resolve().parent.parent / "skills"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def describe(text: str) -> str:
    """The first non-empty line that is not a heading, else the spec's default."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return stripped
    return "No description provided."


class SkillLoader:
    """Finds skills; earlier folders win when two hold the same name."""

    def __init__(self, workspace: Path, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        dirs: list[Path] = []
        if env.get("BAREAGENT_SKILLS_DIR"):
            dirs.append(Path(env["BAREAGENT_SKILLS_DIR"]).expanduser())
        dirs += [workspace / ".toold" / "skills", BUNDLED_SKILLS]
        self.dirs = dirs

    def _find(self, name: str) -> Path | None:
        if not _NAME.match(name):
            return None
        for folder in self.dirs:
            candidate = folder / name / "SKILL.md"
            if candidate.is_file():
                return candidate
        return None

    def load(self, skill_name: str) -> str:
        """``load_skill``: the SKILL.md text, stripped."""
        name = skill_name.strip()
        if not name:
            raise ValueError("skill_name must not be empty")
        path = self._find(name)
        if path is None:
            raise ValueError(f"Unknown skill: {skill_name}")
        return path.read_text(encoding="utf-8").strip()

    def list(self) -> list[dict[str, Any]]:
        """Every skill as ``{name, description, path}``, sorted by name."""
        found: dict[str, dict[str, Any]] = {}
        for folder in self.dirs:
            if not folder.is_dir():
                continue
            for entry in sorted(folder.iterdir()):
                skill = entry / "SKILL.md"
                if entry.name in found or not _NAME.match(entry.name) or not skill.is_file():
                    continue
                try:
                    text = skill.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                found[entry.name] = {
                    "name": entry.name,
                    "description": describe(text),
                    "path": os.fspath(skill),
                }
        return [found[name] for name in sorted(found)]
