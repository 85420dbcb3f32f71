"""``python -m toolkit.cli``: the same command as the ``stagelens`` script (tests run it this way)."""

from toolkit.cli import main

main()
