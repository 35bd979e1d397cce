"""``python -m kgeval``: the command line of :mod:`kgeval.cli`."""

from kgeval.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
