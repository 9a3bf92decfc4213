"""The files of a run's spill folder (diskio.spill.SpillFolder): made, written, and the one error a
command reports when they cannot be (a --tmp-dir that is unusable or full), never an OSError."""
from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

from bkdisk.formats.errors import BkdiskError

if TYPE_CHECKING:
    from bkdisk.diskio.spill import SpillFolder


class SpillError(BkdiskError):
    """A temporary folder that cannot be used (inside a bookie's dirs, not writable, full)."""


def np_contiguous(arr):
    # (numpy imported here, as in diskio/spill.py: the memory options' module imports these for --help)
    import numpy as np
    return np.ascontiguousarray(arr)


def spill_file(folder: SpillFolder, name: str) -> str:
    """A new empty file of the spill folder, its name beginning with ``name``."""
    try:
        fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".bin", dir=folder.get())
    except OSError as e:
        raise _no_room(folder.get(), e) from None
    os.close(fd)
    return path


def write_rows(path: str, parts, at: int | None = None) -> None:
    """The arrays ``parts`` written to the spill file ``path`` (appended, or from byte ``at``); a failed
    write (most often a full --tmp-dir) is a SpillError naming the file."""
    try:
        with open(path, "ab" if at is None else "r+b") as f:
            if at is not None:
                f.seek(at)
            for a in parts:
                f.write(memoryview(np_contiguous(a)).cast("B"))
    except OSError as e:
        raise _no_room(path, e) from None


def _no_room(path: str, e: OSError) -> SpillError:
    return SpillError(f"{path}: cannot write what does not fit in --memory-limit ({e.strerror}); give --tmp-dir "
                      "a folder with room, or a higher --memory-limit")
