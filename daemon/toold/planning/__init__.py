"""Planning state: the session's TODOs, persistent tasks and skills. Never imports pygls."""
