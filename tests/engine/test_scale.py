"""Many fresh workspaces on the default path leave a bounded footprint.

One-shot ``toold call read_file`` in fresh workspaces, one after the other, as a CI job
or a test suite drives toold, with the engine on (the ``engines`` fixture unsets
TOOLD_NO_DAEMON). The suite runs 8 workspaces with room for 2 idle engines and a
one-shot idle time longer than the test, so only eviction can bound them;
``tests/bench/engines.py`` runs the issue's 60 with the defaults and prints the figures.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.engine.footprint import footprint
from tests.engine.support import Engines, live_engines
from tests.waiting import wait_until

WORKSPACES = 8
CAP = 2


def test_fresh_workspaces_leave_at_most_the_cap_of_idle_engines(
    engines: Engines, tmp_path: Path
) -> None:
    folders = []
    for index in range(WORKSPACES):
        folder = tmp_path / f"ws{index:02d}"
        folder.mkdir()
        (folder / "a.txt").write_text(f"workspace {index}\n")
        (folder / "toold.toml").write_text(
            f"[daemon]\nmax_idle_engines = {CAP}\none_shot_idle_timeout = 600\n"
        )
        folders.append(folder)
        done = engines.toold("call", "read_file", '{"file_path": "a.txt"}', cwd=folder)
        assert done.returncode == 0 and f"workspace {index}" in done.stdout, done.stderr

    # Evicted engines exit on their own: wait for it (each new engine, and each that goes
    # idle, asks the least recently used idle ones beyond the cap to stop).
    wait_until(
        lambda: len(live_engines(engines.runtime)) <= CAP,
        lambda: f"at most {CAP} engines ({len(live_engines(engines.runtime))} run)",
        timeout=60,
    )
    listed = json.loads(engines.toold("daemon", "list", "--json", cwd=tmp_path).stdout)
    assert {entry["workspace"] for entry in listed} == {str(f) for f in folders[-CAP:]}
    rss, instances = footprint(listed)
    print(
        f"\n{WORKSPACES} workspaces, cap {CAP}: {len(listed)} engines left, "
        f"{rss / 2**20:.0f} MiB resident, {instances} inotify instances"
    )
    # One instance per engine (toold.watching.WatchHub): every watch of a workspace on it.
    assert instances <= len(listed)
