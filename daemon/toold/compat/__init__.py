"""The seed systems' faces, kept as thin adapters over the one run path.

toold implements two earlier tool systems: BareAgent's (a coding agent's tools, bound to a
workspace by ``get_handlers``) and Jianmu's (a ``Tool`` base class assembled into a
``ToolSet`` by ``BuiltinToolProvider``). Their specified entry points live here, each
calling ``Tool.call`` and nothing else: they answer with the tool's own result and raise
its exceptions, as the seeds did, and run no guard. An agent's or a user's call runs
through ``ToolGateway.call`` (toold.gateway) instead.
"""
