"""Background jobs: commands that run while the agent works and report when they end."""
