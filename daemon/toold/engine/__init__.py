"""One engine per workspace, shared by every client.

The engine is a detached process serving one workspace on an owner-only Unix socket
(``location``); clients attach to it (``attach``: ``toold call``, ``toold tools``,
``toold run``, ``toold daemon``), ``toold serve`` hands it the editor's stdio
(``relay``), and each connection is a session of its own (``sessions``, ``engine``).
The client side imports the standard library only, so attaching stays fast.
"""
