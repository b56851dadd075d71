"""``python -m ebb_core.cli``: the same as ``ebb``."""

from . import main

main()
