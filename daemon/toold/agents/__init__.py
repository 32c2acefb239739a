"""Agents: the Anthropic provider, the agent loop, subagents."""
