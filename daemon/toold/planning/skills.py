"""SkillLoader: ``<dir>/<name>/SKILL.md``, searched in BAREAGENT_SKILLS_DIR, .toold/skills,
then the skills bundled with toold.

Skill folders and SKILL.md files are opened through storage.open_state: no symlink is
followed (``.toold/skills/notes -> /outside`` or ``notes/SKILL.md -> /etc/passwd``).
load_skill refuses such a skill with an error naming the file; skills/list skips it
with a warning in the log. Names are checked where they are read.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toold.sandbox.paths import DIR_FLAGS
from toold.storage import open_state, state_names

log = logging.getLogger(__name__)

BUNDLED_SKILLS = Path(__file__).resolve().parent.parent / "skills"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_SKILL_BYTES = 1_048_576


def describe(text: str) -> str:
    """The first non-empty line that is not a heading, else the spec's default."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return stripped
    return "No description provided."


def is_skill_dir(folder: Path) -> bool:
    """Whether ``folder`` is a folder reached without a symlink (what the loader reads)."""
    try:
        os.close(open_state(folder, DIR_FLAGS))
    except OSError:
        return False
    return True


def _read_skill(path: Path) -> str:
    """The text of SKILL.md at ``path``, never through a symlink.

    FileNotFoundError / NotADirectoryError when there is none; PermissionError naming
    the file for a link, a non-file or an oversized file.
    """
    fd = open_state(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PermissionError(f"Refusing skill file {path}: not a regular file")
        if info.st_size > MAX_SKILL_BYTES:
            raise PermissionError(
                f"Refusing skill file {path}: {info.st_size} bytes (max: {MAX_SKILL_BYTES})"
            )
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_SKILL_BYTES + 1)
    finally:
        os.close(fd)
    return data.decode("utf-8")


class SkillLoader:
    """Finds skills; earlier folders win when two hold the same name."""

    def __init__(self, workspace: Path, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        dirs: list[Path] = []
        if env.get("BAREAGENT_SKILLS_DIR"):
            # The user's own choice: links in the path leading to it are theirs to make.
            dirs.append(Path(env["BAREAGENT_SKILLS_DIR"]).expanduser().resolve())
        dirs += [workspace / ".toold" / "skills", BUNDLED_SKILLS]
        self.dirs = dirs

    def load(self, skill_name: str) -> str:
        """``load_skill``: the SKILL.md text, stripped.

        A skill reached through a symlink is refused (ValueError naming the file), not
        passed over for one further down the search order.
        """
        name = skill_name.strip()
        if not name:
            raise ValueError("skill_name must not be empty")
        if not _NAME.match(name):
            raise ValueError(f"Unknown skill: {skill_name}")
        for folder in self.dirs:
            path = folder / name / "SKILL.md"
            try:
                return _read_skill(path).strip()
            except (FileNotFoundError, NotADirectoryError):
                continue
            except PermissionError as exc:
                raise ValueError(f"Cannot load skill {name}: {exc}") from None
            except UnicodeDecodeError:
                raise ValueError(f"Cannot load skill {name}: {path} is not UTF-8 text") from None
        raise ValueError(f"Unknown skill: {skill_name}")

    def list(self) -> list[dict[str, Any]]:
        """Every skill as ``{name, description, path}``, sorted by name.

        Skills behind a symlink (the folder, the skill's folder or its SKILL.md) are
        skipped with a warning in the log.
        """
        found: dict[str, dict[str, Any]] = {}
        for folder in self.dirs:
            try:
                names = state_names(folder)
            except OSError as exc:
                log.warning("skipping skills folder %s: %s", folder, exc)
                continue
            for name in names:
                if name in found or not _NAME.match(name):
                    continue
                skill = folder / name / "SKILL.md"
                try:
                    text = _read_skill(skill)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except (OSError, UnicodeDecodeError) as exc:
                    log.warning("skipping skill %s: %s", name, exc)
                    continue
                found[name] = {
                    "name": name,
                    "description": describe(text),
                    "path": os.fspath(skill),
                }
        return [found[name] for name in sorted(found)]
