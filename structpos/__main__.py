"""``python -m structpos``: the same command line as ``structpos``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
