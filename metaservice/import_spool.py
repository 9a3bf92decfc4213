"""The bytes of a folder's metadata files as the import's check read them, kept for its sending pass.

An unlinked temporary file (the system's temporary folder, ``TMPDIR``) written in the order the
files were read, a record a ledger (its file's name, then its bytes), and beside it, in memory,
each record's ledger, place and sizes (30 bytes a ledger). The sending pass reads the records back in
ledger id order, one ``pread`` each, instead of listing the folder and opening every file again,
and it sends the very bytes that were checked. In id order, ledgers that share parent znodes
(ZooKeeper's hierarchy) go in the same batch and the SQLite store's primary key grows at its end.
A spool that cannot be written (no room, no temporary folder) says so through ``broken``: the
caller reads the folder again.
"""
from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterator
from typing import IO

import numpy as np

from bkdisk.diskio.mapped import DiskError
from bkdisk.formats.ids import LedgerId

PREFIX = "bkdisk-import-"
BUFFER = 1 << 20
_CHUNK = 1 << 16                     # positions turned into Python ints at a time (not a million at once)


class Spool:
    """The records of one import: ``add`` each file the check read, ``finish``, then ``records``."""

    def __init__(self) -> None:
        self.broken: OSError | None = None
        self._file: IO[bytes] | None = None
        self._at = 0
        self._scope, self._ledger, self._offset = array("Q"), array("Q"), array("Q")
        self._size, self._name_size = array("I"), array("H")
        try:
            self._file = tempfile.TemporaryFile(prefix=PREFIX, buffering=BUFFER)
        except OSError as exc:
            self.broken = exc

    @property
    def count(self) -> int:
        return len(self._size)

    def add(self, lid: LedgerId, name: str, data: bytes) -> None:
        if self._file is None:
            return
        raw = name.encode("utf-8")
        record = raw + data
        try:
            self._file.write(record)
        except OSError as exc:
            self._give_up(exc)
            return
        self._scope.append(lid.scope)
        self._ledger.append(lid.ledger)
        self._offset.append(self._at)
        self._size.append(len(record))
        self._name_size.append(len(raw))
        self._at += len(record)

    def finish(self) -> None:
        """Every record written: flushed, so that a full disk shows now (``broken``), not while sending."""
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as exc:
                self._give_up(exc)

    def records(self) -> Iterator[tuple[LedgerId, str, bytes]]:
        """Every record, in ledger id order (scope, then ledger): (ledger, file name, bytes). The spool
        must be finished and not broken."""
        assert self._file is not None and self.broken is None
        fd = self._file.fileno()
        order = np.lexsort((np.frombuffer(self._ledger, np.uint64), np.frombuffer(self._scope, np.uint64)))
        for start in range(0, len(order), _CHUNK):
            for i in order[start:start + _CHUNK].tolist():
                try:
                    record = os.pread(fd, self._size[i], self._offset[i])
                except OSError as e:
                    raise DiskError(os.path.join(tempfile.gettempdir(), PREFIX + "*"),
                                    f"cannot read back the import's spool ({e.strerror})") from None
                n = self._name_size[i]
                yield LedgerId(self._scope[i], self._ledger[i]), record[:n].decode("utf-8"), record[n:]

    def _give_up(self, exc: OSError) -> None:
        self.broken = exc
        self.close()

    def close(self) -> None:
        if self._file is not None:
            f, self._file = self._file, None
            try:
                f.close()
            except OSError:
                pass            # (a buffer that could not be flushed: the file is gone anyway)
