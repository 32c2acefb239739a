"""Suite-wide settings."""

from __future__ import annotations

import os

# The bash tool runs `bash -lc`; on machines whose login profile runs `pyenv rehash`, a
# shell killed mid-rehash (as the timeout and cancel tests do) leaves a lock that makes
# every later login shell wait up to 60 s. Fail that wait fast instead.
os.environ.setdefault("PYENV_REHASH_TIMEOUT", "1")
