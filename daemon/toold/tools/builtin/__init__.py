"""Builtin tools, one module per family; each module lists its classes in TOOLS."""
