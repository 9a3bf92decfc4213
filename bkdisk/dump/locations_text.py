"""`bkdisk dump locations` at kernel speed: the text lines BookKeeper's shell prints for DbLedgerStorage
(``entry E\\t:\\t(log: G, pos: P)``, each ledger after its ``===== LEDGER: L =====`` line) and the JSON
Lines rows, written from a chunk of location columns by one jitted loop, never a Python object per entry."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.jsonl import INT, RowTemplate, Slot, put_decimal
from bkdisk.dump import shell_format as sf
from bkdisk.formats.dbledger import ENTRY_SIZE_FIELD

DECIMAL = 20                         # the widest signed 64-bit decimal
_HEADER = sf.ledger_index_header_line("\0").split("\0")
_LINE = ("entry ", "\t:\t(log: ", ", pos: ", ")\n")
_PIECES = [p.encode("utf-8") for p in (*_HEADER, *_LINE)]
LIT = np.frombuffer(b"".join(_PIECES), np.uint8)
LIT_OFF = np.cumsum([0] + [len(p) for p in _PIECES]).astype(np.int64)
ROW_BOUND = len(LIT) + 4 * DECIMAL


def line(entry: int, log: int, pos: int) -> str:
    """One entry's line (the reference the kernel's output is held to)."""
    return f"{_LINE[0]}{entry}{_LINE[1]}{log}{_LINE[2]}{pos}{_LINE[3]}"


@inline_kernel
def _put(out, p, lit, off, i):
    for k in range(off[i], off[i + 1]):
        out[p] = lit[k]
        p += 1
    return p


@kernel
def _listing(ledger, entry, log, pos, headers, last, lit, off, out):
    """Write the lines of every row into ``out``; ``last`` = [a ledger was written, that ledger]."""
    p = 0
    for r in range(len(ledger)):
        if headers and (last[0] == 0 or ledger[r] != last[1]):
            p = _put(out, p, lit, off, 0)
            p = put_decimal(out, p, ledger[r], False)
            p = _put(out, p, lit, off, 1)
            last[0] = 1
            last[1] = ledger[r]
        p = _put(out, p, lit, off, 2)
        p = put_decimal(out, p, entry[r], False)
        p = _put(out, p, lit, off, 3)
        p = put_decimal(out, p, log[r], False)
        p = _put(out, p, lit, off, 4)
        p = put_decimal(out, p, pos[r], False)
        p = _put(out, p, lit, off, 5)
    return p


class Listing:
    """The text of consecutive chunks: a ledger's header line only where a new ledger starts, across chunks."""

    def __init__(self, headers: bool):
        self.headers, self.last = headers, np.zeros(2, np.int64)
        self.buf = np.empty(0, np.uint8)

    def encode(self, cols: dict[str, np.ndarray]) -> memoryview:
        """The lines of a chunk, in a buffer the next call reuses (write it out before then)."""
        n = len(cols["ledger"])
        if len(self.buf) < n * ROW_BOUND:
            self.buf = np.empty(n * ROW_BOUND, np.uint8)
        used = _listing(cols["ledger"], cols["entry"], cols["log"], cols["offset"], self.headers, self.last,
                        LIT, LIT_OFF, self.buf)
        return self.buf[:used].data


def json_rows(db: str) -> tuple[RowTemplate, Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]]:
    """The JSON Lines template of a location row of database ``db``, and the columns it takes from a chunk."""
    keys = ("ledger", "entry", "log", "pos", "offset")
    t = RowTemplate({"db": db, "kind": "location"}, [Slot(k, INT) for k in keys], ("db", "kind") + keys)

    def columns(c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"ledger": c["ledger"], "entry": c["entry"], "log": c["log"], "pos": c["offset"],
                "offset": c["offset"] - ENTRY_SIZE_FIELD}
    return t, columns
