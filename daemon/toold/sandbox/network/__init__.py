"""A sandbox's way out under an ``[execution.network]`` policy: a proxy and its forwarder.

policy judges a host, port and method against the allow and deny lists, with the
address rules of http_request; proxy is the HTTP proxy the daemon runs on a Unix socket
for one sandbox; forward runs inside the sandbox and relays its loopback port there.
"""

PROXY_PORT = 3128
"""The port the forwarder listens on, on the sandbox's own loopback (its own namespace)."""
SOCKET_DIR = "/run/toold-network"
"""Where the proxy's socket folder is bound inside a sandbox."""
SOCKET_NAME = "proxy.sock"
