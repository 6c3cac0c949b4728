"""The command line, `abductune COMMAND`: one module per command family (`tune`, `replay`,
`sweep` with `import` and `harvest`, `theory` with `learn`, `predict` and `explain`, `cache`,
`daemon`, `listing` with `kernels` and `strategies`) printing through `output`, checking what
the user gave with `args`, gathered into the click group in `group`. `inprocess` runs a command
line for the daemon. The console script is `abductune.launch:main`, which asks a warm daemon
first; `abductune.cli:main` is the click group itself."""
from .group import main

__all__ = ["main"]
