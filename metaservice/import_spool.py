"""The bytes of a folder's metadata files as the import's check read them, kept for its sending pass.

An unlinked temporary file (the system's temporary folder, ``TMPDIR``) written and then read in
order, a record a ledger (scope, ledger id, its file's name, its bytes): the sending pass reads one file
sequentially instead of listing the folder and opening every file again, and it sends the very
bytes that were checked. Memory stays one buffer whatever the folder's size. A spool that cannot be
written (no room, no temporary folder) says so through ``broken``: the caller reads the folder again.
"""
from __future__ import annotations

import struct
import tempfile
from collections.abc import Iterator
from typing import IO

from bkdisk.formats.ids import LedgerId

_HEAD = struct.Struct("<QQHI")      # scope, ledger id, lengths of the name and of the bytes that follow
BUFFER = 1 << 20


class Spool:
    def __init__(self) -> None:
        self.count = 0
        self.broken: OSError | None = None
        self._file: IO[bytes] | None = None
        try:
            self._file = tempfile.TemporaryFile(prefix="bkdisk-import-", buffering=BUFFER)
        except OSError as exc:
            self.broken = exc

    def add(self, lid: LedgerId, name: str, data: bytes) -> None:
        if self._file is None:
            return
        raw = name.encode("utf-8")
        try:
            self._file.write(_HEAD.pack(lid.scope, lid.ledger, len(raw), len(data)) + raw)
            self._file.write(data)
            self.count += 1
        except OSError as exc:
            self._give_up(exc)

    def records(self) -> Iterator[tuple[LedgerId, str, bytes]]:
        """Every record added, in order: (ledger, file name, bytes). The spool must not be broken."""
        assert self._file is not None and self.broken is None
        f = self._file
        f.seek(0)
        for _ in range(self.count):
            scope, ledger, name_size, size = _HEAD.unpack(f.read(_HEAD.size))
            name = f.read(name_size).decode("utf-8")
            yield LedgerId(scope, ledger), name, f.read(size)

    def finish(self) -> None:
        """Every record written: flushed, so that a full disk shows now (``broken``), not while sending."""
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as exc:
                self._give_up(exc)

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
