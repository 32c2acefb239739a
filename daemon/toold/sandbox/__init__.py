"""Isolation: the workspace path guard, process control and tool runners."""
