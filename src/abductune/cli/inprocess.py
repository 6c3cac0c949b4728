"""One command line run in this process on the caller's streams, as the `abductune` entry point
would run it: the seam through which the daemon runs a client's command (it imports this
module, never the click group or the consoles)."""
from __future__ import annotations

from . import output
from .group import main


def run_command(argv: list[str], tty_out: bool = False, tty_err: bool = False, columns: int | None = None) -> int:
    """Run `abductune ARGV` here and return its exit code. Output goes to sys.stdout and
    sys.stderr (the caller points them where it wants), printed as on a terminal of `columns`
    width where `tty_out`/`tty_err` say the client's streams are terminals; the consoles are
    put back afterwards. The daemon is not asked to run it (the caller is the daemon)."""
    with output.serving(tty_out, tty_err, columns):
        try:
            main.main(args=argv, prog_name="abductune", standalone_mode=True)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0
