"""Diagnostics from the workspace's language servers, reported after each edit.

toold is an LSP client of the servers ``[diagnostics]`` in toold.toml names (or that it
finds installed): client.py speaks to one server, servers.py says which server checks
which file, launch.py starts them under the runner's policy, service.py keeps them and
their answers per workspace, report.py compares and words them, and step.py is what the
gateway runs around a file-changing call.
"""
