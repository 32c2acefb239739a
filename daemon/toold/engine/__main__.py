"""``python -P -m toold.engine --workspace DIR [--ready-fd N] [--env-fd N]``: run a
workspace's engine."""

from __future__ import annotations

import argparse
from pathlib import Path

from toold.engine.engine import main

parser = argparse.ArgumentParser(prog="toold.engine", description=__doc__)
parser.add_argument("--workspace", type=Path, required=True)
parser.add_argument("--ready-fd", type=int, help="write a line here once listening")
parser.add_argument("--env-fd", type=int, help="read the environment (JSON) from here")
args = parser.parse_args()
raise SystemExit(main(args.workspace, args.ready_fd, args.env_fd))
