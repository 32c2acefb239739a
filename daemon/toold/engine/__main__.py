"""``python -P -m toold.engine --workspace DIR [--ready-fd N] [--env-fd N]``: run a
workspace's engine.

``attach`` starts it, never a user: the three options are read by hand, because argparse
(and gettext, which it loads) would stay in every idle engine's memory for one parse.
"""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = "usage: python -P -m toold.engine --workspace DIR [--ready-fd N] [--env-fd N]"
MALLOC_ARENA_MAX = 2
"""glibc's malloc arenas for the engine's threads (its default: 8 per core). Python's
small objects live in its own arenas; the rest (buffers, large dicts) stays in fewer,
fuller malloc arenas, and an idle engine keeps less freed memory resident."""


def parse(argv: list[str]) -> tuple[Path, int | None, int | None]:
    """The workspace, ready descriptor and environment descriptor named by ``argv``."""
    values: dict[str, str] = {}
    words = iter(argv)
    for word in words:
        name, equals, value = word.partition("=")
        if name not in ("--workspace", "--ready-fd", "--env-fd"):
            raise SystemExit(f"toold.engine: unknown argument {word!r}\n{USAGE}")
        if not equals:
            value = next(words, "")
        if not value:
            raise SystemExit(f"toold.engine: {name} needs a value\n{USAGE}")
        values[name] = value
    if "--workspace" not in values:
        raise SystemExit(f"toold.engine: --workspace is required\n{USAGE}")
    fds: list[int | None] = []
    for name in ("--ready-fd", "--env-fd"):
        text = values.get(name)
        if text is not None and not text.isdigit():
            raise SystemExit(f"toold.engine: {name} needs a descriptor number, not {text!r}")
        fds.append(int(text) if text is not None else None)
    return Path(values["--workspace"]), fds[0], fds[1]


def limit_malloc_arenas() -> None:
    """Cap glibc's malloc arenas (before any thread starts); nothing elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # the engine loads it anyway (hardening's prctl)

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a libc without mallopt
        return
    mallopt(-8, MALLOC_ARENA_MAX)  # M_ARENA_MAX


if __name__ == "__main__":
    workspace, ready_fd, env_fd = parse(sys.argv[1:])
    limit_malloc_arenas()
    from toold.engine.process import main

    raise SystemExit(main(workspace, ready_fd, env_fd))
