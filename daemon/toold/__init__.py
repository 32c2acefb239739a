"""toold: a per-workspace JSON-RPC daemon exposing an AI agent's tools to editors and CI."""

__version__ = "0.1.0"
