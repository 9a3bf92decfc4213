"""The options that bound a command's memory: ``--memory-limit MiB`` and ``--tmp-dir DIR``.

One declaration for every command that reads a whole bookie (bookie-fsck, bkdisk inventory, scan-disk
and audit), so each says them and their errors the same way.
"""
from __future__ import annotations

import functools

import click

from bkdisk.diskio.spill import DEFAULT_MEMORY_MIB, MIN_MEMORY_MIB, MemoryLimit

MEMORY_HELP = (f"Peak memory to stay under, in MiB (default {DEFAULT_MEMORY_MIB}): per-entry tables that do not "
               "fit are spilled to --tmp-dir, partitioned, with the same results.")
TMP_HELP = ("Where spilled tables go (default: the system's temporary folder); never inside a bookie's dirs. "
            "Removed when the command ends.")


def memory_options(fn):
    """Add the two options; the command receives ``memory: MemoryLimit``."""

    @click.option("--memory-limit", "memory_limit", type=click.IntRange(min=MIN_MEMORY_MIB), default=DEFAULT_MEMORY_MIB,
                  show_default=True, metavar="MiB", help=MEMORY_HELP)
    @click.option("--tmp-dir", "tmp_dir", default=None, metavar="DIR", help=TMP_HELP)
    @functools.wraps(fn)
    def wrapper(*a, memory_limit=DEFAULT_MEMORY_MIB, tmp_dir=None, **kw):
        kw["memory"] = MemoryLimit(memory_limit, tmp_dir)
        return fn(*a, **kw)

    return wrapper
