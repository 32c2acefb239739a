"""A language server that reads its input and never answers (a hung server, for tests)."""

import sys

while sys.stdin.buffer.read(4096):
    pass
