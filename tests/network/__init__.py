"""The network proxy and its allow-list, through the bwrap and docker runners."""
