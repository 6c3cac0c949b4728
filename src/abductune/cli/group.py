"""The `abductune` click group: its options, every command family added to it, and what it
makes of a failed command (one line on stderr, exit code 2; Ctrl-C exit code 130)."""
from __future__ import annotations

import logging
import sys
from typing import Any

import click

from ..errors import AbductuneError
from .cache import cache
from .daemon import daemon
from .listing import kernels_cmd, strategies
from .moe import tune_moe_cmd
from .output import error_line
from .replay import replay_cmd
from .sweep import harvest_cmd, import_cmd, sweep_cmd
from .theory import explain_cmd, learn_cmd, predict_cmd
from .tune import tune_cmd


class _Group(click.Group):
    """Every mistake a user can make ends as one plain line on stderr and exit code 2: our
    AbductuneError, click's usage errors (which would print a usage block), a missing gpu
    extra, and an OS error on a path the user gave."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:  # a caller driving click itself gets click's behaviour
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        if args is None:  # the real command line: a warm daemon may run it (`abductune daemon`)
            from ..daemon.client import forward_or_start  # the client alone: the daemon's server runs us

            code = forward_or_start(sys.argv[1:])
            if code is not None:
                sys.exit(code)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "abductune"
            error_line(f"{e.format_message()} (see `{cmd} --help`)")
            sys.exit(2)
        except click.ClickException as e:
            error_line(e.format_message())
            sys.exit(2)
        except click.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):  # Ctrl-C before a command ran
                print("interrupted", file=sys.stderr)
                sys.exit(130)
            error_line("aborted")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)  # --help and --version return their code

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:  # Ctrl-C: exit 130 (the shell's), saying what was kept
            note = getattr(e, "note", "") or _INTERRUPT_NOTES.get(ctx.invoked_subcommand or "", "")
            print(f"interrupted: {note}" if note else "interrupted", file=sys.stderr)
            sys.exit(130)
        except AbductuneError as e:
            error_line(str(e))
            sys.exit(2)
        except ModuleNotFoundError as e:
            if e.name in ("torch", "triton"):
                error_line(f"{e.name} is not installed: live tuning and sweeps need the gpu extra "
                           "(pip install 'abductune[gpu]')")
                sys.exit(2)
            raise
        except OSError as e:
            if e.filename is None:  # not about a path the user gave: a bug worth its traceback
                raise
            error_line(f"cannot use {e.filename}: {e.strerror or type(e).__name__}")
            sys.exit(2)


# what a command interrupted without a note of its own kept (`tune` and `sweep` count theirs)
_INTERRUPT_NOTES = {"replay": "replay measures nothing and keeps nothing (it reads recorded datasets): "
                              "rerun it to start again"}


def _version() -> str:
    from .. import __version__

    return __version__


@click.group(cls=_Group)
@click.version_option(_version(), "--version", prog_name="abductune")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages.")
def main(verbose: bool) -> None:
    """abductune: find fast Triton launch configs with few measurements."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


# the command families, each in a module of its own (`abductune --help` lists them by name)
for _cmd in (strategies, replay_cmd, import_cmd, tune_cmd, kernels_cmd, sweep_cmd, harvest_cmd, cache, daemon,
             learn_cmd, predict_cmd, explain_cmd, tune_moe_cmd):
    main.add_command(_cmd)
