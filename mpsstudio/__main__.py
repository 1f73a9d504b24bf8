"""`python -m mpsstudio`: the same entry point as the `mpsstudio` command."""

import sys

from mpsstudio.launcher import main

if __name__ == "__main__":
    sys.exit(main())
