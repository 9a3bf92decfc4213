"""The file a command writes its rows to (written beside it, then renamed over it): never inside a dir
of a bookie the command reads, and never a name that is not a regular file already (a folder, a FIFO, a
device, a symbolic link: the rename would replace the link or the device's name, or fail only at the
end of the scan). Checked before anything is read."""
from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping

from bkdisk.diskio.spill import inside
from bkdisk.formats.errors import BkdiskError


class OutputRefused(BkdiskError):
    """A place to write refused, in one line naming it and the option that gave it."""


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def refuse_output_file(path: str, option: str, read_dirs: Iterable[str]) -> None:
    """OutputRefused when ``path`` lies in one of ``read_dirs`` (symbolic links followed) or names
    something other than a regular file."""
    for d in read_dirs:
        if inside(path, d):
            raise OutputRefused(f"{path}: {option} is inside {d}, a dir of a bookie this command reads; "
                                "expected a file outside every bookie dir")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise OutputRefused(f"{path}: {option}: cannot look at it ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputRefused(f"{path}: {option} is {_kind(st.st_mode)}; expected a regular file to write "
                            "(it is replaced whole)")


def refuse_not_utf8(given: Mapping[str, str | None]) -> None:
    """OutputRefused naming the first of ``given`` (option -> value) that is not UTF-8 text (a path whose
    name holds other bytes): what goes into Parquet rows, or names a Parquet file, must be text."""
    for option, value in given.items():
        if value is None:
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise OutputRefused(f"{ascii(value)}: {option}: expected UTF-8 text, found bytes that are not "
                                "(the rows name it as text): rename it, or give another") from None
