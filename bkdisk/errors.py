"""How the command line reports failures: one line on stderr, an e2fsck-style exit code."""
from __future__ import annotations

import functools
import sys

import click

from formats.errors import BkdiskError

from fsck.exit_codes import EXIT_CANCELLED, EXIT_OPERATIONAL  # the one table of exit codes


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
