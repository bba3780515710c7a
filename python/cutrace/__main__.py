"""``python -m cutrace ARGS``: the same as the ``cutrace`` command.

The process becomes the packaged binary (exec), so stdin, stdout, stderr, signals and the exit
status are the binary's own, as with the ``cutrace`` command itself.
"""

import os
import sys

from ._api import binary


def main() -> None:
    """Replaces this process with the packaged ``cutrace`` binary, passing the arguments on."""
    exe = binary()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
