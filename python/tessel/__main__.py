"""python -m tessel: the `tessel` command line (see tessel.cli)."""
from .cli import entry

entry()
