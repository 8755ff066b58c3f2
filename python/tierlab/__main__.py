"""``python -m tierlab`` runs the command-line interface."""

import sys

from tierlab.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
