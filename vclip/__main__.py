"""``python -m vclip``: the vclip command line (see :mod:`vclip.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
