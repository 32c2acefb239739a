"""``toold acp``: toold as a coding agent for ACP editors (the Agent Client Protocol).

The official Python SDK (``acp``) frames and routes the protocol; this package
translates it to toold: a session binds a workspace (toold.assembly.bind), a prompt
runs the agent loop (toold.agents.loop) whose every tool call goes through the
workspace's gateway, and the loop's events come back as ``session/update``s.
"""
