"""Bridges from toold to other protocols (the Model Context Protocol: mcp_server.py)."""
