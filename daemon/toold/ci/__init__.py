"""``toold run``: CI scripts of tool steps, run through a real daemon (see script.py, runner.py)."""
