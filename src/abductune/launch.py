"""The `abductune` console script. A `tune` that a warm daemon serves is sent there before the
command-line modules (click, rich, the strategies) are imported: they cost a forwarded command
more than its own tune of a recorded shape. Everything else goes to `abductune.cli`."""
from __future__ import annotations

import sys


def main() -> None:
    from .daemon.client import forward_or_start

    code = forward_or_start(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .cli import main as cli_main

    cli_main(args=sys.argv[1:], prog_name="abductune")  # args given: the daemon was asked already


if __name__ == "__main__":
    main()
