"""How a command runs: click's outcomes mapped to exit codes, bkdisk errors turned into one line, a
command's reads of bookie files guarded, and the interpreter's exit spared the collection of what the
command allocated."""
from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import ParamSpec, TextIO, TypeVar

import click

from bkdisk.commandline import early_cancel
from bkdisk.commandline.exit_codes import EXIT_CANCELLED, EXIT_OPERATIONAL, EXIT_OUTPUT_CLOSED, EXIT_USAGE
from bkdisk.commandline.lazy import lazy_import
from bkdisk.formats.errors import BkdiskError

P = ParamSpec("P")
R = TypeVar("R")

# Loaded by the commands that run guarded, not by `--help` or a usage error (it maps shared memory
# and loads threading and typing).
fault_guard = lazy_import("bkdisk.diskio.fault_guard")


def run_click(command: click.Command, prog_name: str, argv: list[str] | None = None) -> None:
    """Run a click command with e2fsck's codes for what click itself reports: usage 16, abort 32.

    gRPC's own log lines are off unless the environment asks for them (GRPC_VERBOSITY): a command says
    what failed in one line of its own (an address in use, a certificate that is not PEM, a service
    out of reach), which the library's lines would otherwise precede."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        early_cancel.hand_back()   # from here a Ctrl-C unwinds (click says it as Abort)
        rv = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo(f"{prog_name}: cancelled", err=True)
        sys.exit(EXIT_CANCELLED)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    sys.exit(rv if isinstance(rv, int) else 0)


def console_command(fn: Callable[..., object], *args: object) -> None:
    """Run a console command (``fn(*args)``) and, however it ends, freeze what it allocated
    (``gc.freeze``) so that the interpreter's last collections at exit skip it: they walk every
    object numba and numpy made, time spent freeing memory the process is about to give back.
    Objects are still released as the modules are torn down; only garbage held in reference cycles
    is left to the operating system (Python's exit never promised to finalize it).

    numpy's BLAS is held to one thread (unless the environment says otherwise): at import it starts
    a thread per core that polls for work, and the commands do no linear algebra."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        fn(*args)
    finally:
        gc.freeze()


class _Ending:
    """Set by ``guarded``: the process ends with ``_exit_now`` once its command returns."""
    now = False
    kept: list[object] = []


def kept_until_exit(obj: object) -> None:
    """Keep ``obj`` (a finished command's results, with their arrays) until the process exits, when it
    ends with ``_exit_now``: freeing them (unmapping the arrays, dropping millions of small objects)
    is time the user waits for that gives nothing back. In-process callers keep nothing."""
    if _Ending.now:
        _Ending.kept.append(obj)


def guarded(main: Callable[[], object], prog: str) -> None:
    """Run ``main`` as a console command whose reads of bookie files are guarded: a mapped read that
    faults (an I/O error, a file cut short) ends with one line naming the file and exit 8, not a
    silent "Bus error" (diskio/fault_guard.py). The process that runs ``main`` ends with
    ``_exit_now``; a parent that only waited ends at once."""
    _Ending.now = True
    code = fault_guard.guard_command(lambda: _exit_now(_exit_code(main)), prog, EXIT_OPERATIONAL, EXIT_CANCELLED)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0)   # the parent only waited: nothing to finalize


def _exit_code(main: Callable[[], object]) -> object:
    try:
        main()
    except SystemExit as e:
        return e.code
    return 0


def _exit_now(code: object) -> None:
    """End the process as ``sys.exit(code)`` would, without the interpreter's teardown: the output
    flushed and the functions registered with ``atexit`` run (the spill folders' removal among
    them), but no module torn down and no object freed one by one, which on a finished check's
    scans takes tens of milliseconds the user waits for."""
    if code is None:
        code = 0
    elif not isinstance(code, int):   # sys.exit("message"): said on stderr, exit 1
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:   # the reader went away (a closed pipe)
            silenced(stream)
    atexit._run_exitfuncs()
    os._exit(code)


def silenced(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null once its reader went away (a closed pipe): what
    is left to write, the last flush included, goes nowhere instead of failing again."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)


def run_until_stopped(announce: Callable[[], object] | None = None) -> None:
    """Block until SIGTERM or Ctrl-C (what a long-running command lives for), output flushed first.
    ``announce`` (the line a caller waits for) runs once SIGTERM is caught: a supervisor that stops
    the command the moment it reads that line gets a clean stop, not the default death."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if announce is not None:
        announce()
    sys.stdout.flush()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn every bkdisk error (and an OS error, such as a full disk under the output) into ``bkdisk: <one
    line>`` and exit 8; Ctrl-C exits 32; an output whose reader went away exits 141, as SIGPIPE would."""

    @functools.wraps(fn)
    def wrapper(*a: P.args, **kw: P.kwargs) -> R:
        try:
            return fn(*a, **kw)
        except BkdiskError as e:
            click.echo(f"bkdisk: {e}", err=True)
            sys.exit(EXIT_OPERATIONAL)
        except KeyboardInterrupt:
            click.echo("bkdisk: cancelled", err=True)
            sys.exit(EXIT_CANCELLED)
        except (UnicodeEncodeError, UnicodeDecodeError) as e:   # a name given that is not UTF-8, where text is needed
            what = ascii(e.object[max(0, e.start - 40):e.end + 40]) if isinstance(e.object, str) else "input"
            click.echo(f"bkdisk: {what}: expected UTF-8 text, found bytes that are not (rename it, or give "
                       "another)", err=True)
            sys.exit(EXIT_OPERATIONAL)
        except BrokenPipeError:   # (the reader went away: nothing is said, as a filter's death by SIGPIPE)
            silenced(sys.stdout)
            sys.exit(EXIT_OUTPUT_CLOSED)
        except OSError as e:   # the output cannot be written (a full disk), or another file
            if e.filename is None:
                silenced(sys.stdout)
            where = e.filename if e.filename is not None else "the output"
            click.echo(f"bkdisk: {where}: cannot write or read ({e.strerror or e})", err=True)
            sys.exit(EXIT_OPERATIONAL)

    return wrapper
