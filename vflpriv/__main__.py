"""``python -m vflpriv``: the command line."""

from vflpriv.cli import main

main()
