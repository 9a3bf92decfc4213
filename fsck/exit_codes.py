"""fsck's exit codes (e2fsck's convention), the click runner that maps click's own outcomes to them, and
the one-line error wrapper every command uses.

Kept apart from the checker so that every command line (bkdisk, bookie-fsck, the spark-submit
application) can use them without importing the passes.
"""
from __future__ import annotations

import functools
import os
import sys

import click

from formats.errors import BkdiskError

EXIT_OK = 0            # no errors
EXIT_CORRECTED = 1     # errors were found and all corrected
EXIT_UNCORRECTED = 4   # errors left
EXIT_OPERATIONAL = 8   # the check itself could not run (a path, a permission, damage that stops it)
EXIT_USAGE = 16        # bad command line
EXIT_CANCELLED = 32    # the user cancelled


def run_click(command: click.Command, prog_name: str, argv: list[str] | None = None) -> None:
    """Run a click command with e2fsck's codes for what click itself reports: usage 16, abort 32."""
    try:
        rv = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo(f"{prog_name}: cancelled", err=True)
        sys.exit(EXIT_CANCELLED)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    sys.exit(rv if isinstance(rv, int) else 0)


def console_command(fn, *args) -> None:
    """Run a console command (``fn(*args)``) and, however it ends, freeze what it allocated
    (``gc.freeze``) so that the interpreter's last collections at exit skip it: they walk every
    object numba and numpy made, about 0.09 s of each command spent freeing memory the process is
    about to give back. Objects are still released as the modules are torn down; only garbage held
    in reference cycles is left to the operating system (Python's exit never promised to finalize it)."""
    try:
        fn(*args)
    finally:
        import gc
        gc.freeze()


def guarded(main, prog: str) -> None:
    """Run ``main`` as a console command whose reads of bookie files are guarded: a mapped read that
    faults (an I/O error, a file cut short) ends with one line naming the file and exit 8, not a
    silent "Bus error" (diskio/fault_guard.py)."""
    from diskio.fault_guard import guard_command
    code = guard_command(main, prog, EXIT_OPERATIONAL, EXIT_CANCELLED)   # (the child exits inside)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # the parent only waited: nothing to finalize, and its exit is not the child's cost again


def one_line_errors(fn):
    """Turn every bkdisk error into ``bkdisk: <one line>`` and exit 8; Ctrl-C exits 32."""

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except BkdiskError as e:
            click.echo(f"bkdisk: {e}", err=True)
            sys.exit(EXIT_OPERATIONAL)
        except KeyboardInterrupt:
            click.echo("bkdisk: cancelled", err=True)
            sys.exit(EXIT_CANCELLED)
        except BrokenPipeError:
            sys.exit(0)

    return wrapper
