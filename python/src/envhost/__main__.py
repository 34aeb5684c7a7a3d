"""`python -m envhost ARGS` runs the envhost binary this package installed
(useful where the environment's scripts folder is not on PATH)."""

import os
import sys

from ._binary import find_binary


def main() -> None:
    binary = find_binary()
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
