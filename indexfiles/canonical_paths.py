"""An index walk's relative paths kept only where they differ from the path the file's ledger id
dictates (formats.paths.index_relpath): on a healthy bookie every ``.idx`` is where its id says, so
the column holds a few bytes per misplaced file and none per placed one, and the rows that differ
are known without comparing a path string per file (pass 2 looks at those rows only).

Rows read as the same strings as the walk's PathColumn (index, slice, iterate, ``==``)."""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.formats.paths import index_relpaths
from bkdisk.indexfiles.listing import INDEX_SUFFIX
from bkdisk.indexfiles.path_column import PathColumn, PathRows

_SLASH = ord("/")
_SUFFIX = np.frombuffer(INDEX_SUFFIX.encode(), np.uint8)


@inline_kernel
def _hex_at(data, at, end, value, width):
    """Whether ``data[at:end]`` is ``value`` in lowercase hex (``width`` digits: zero-padded; 0: no
    padding) followed by nothing else; returns the index past the digits, -1 when not."""
    digits = 1
    v = value >> np.uint64(4)
    while v:
        digits += 1
        v >>= np.uint64(4)
    if width > digits:
        digits = width
    if at + digits > end:
        return -1
    v = value
    for k in range(digits - 1, -1, -1):
        d = np.uint8(v & np.uint64(15))
        c = d + (48 if d < 10 else 87)
        if data[at + k] != c:
            return -1
        v >>= np.uint64(4)
    return at + digits


@kernel(any_layout=("scope", "ledger", "named"))
def _placed(data, ends, scope, ledger, named, suffix, out):
    """Per row: its bytes are index_relpath(scope, ledger) ("/" separators; scope 0: two levels,
    else four and the 32-digit qualified name; then ``suffix``)."""
    start = 0
    for i in range(ends.size):
        end = ends[i]
        ok = named[i]
        at = start
        s, l = scope[i], ledger[i]
        levels = (s >> np.uint64(8), s, l >> np.uint64(8), l)   # each one byte: folder names
        for k in range(0 if s != 0 else 2, 4):
            if not ok:
                break
            at = _hex_at(data, at, end, levels[k] & np.uint64(255), 0)
            ok = 0 <= at < end and data[at] == _SLASH
            at += 1
        if ok:
            if s != 0:
                at = _hex_at(data, at, end, s, 16)
                if at >= 0:
                    at = _hex_at(data, at, end, l, 16)
            else:
                at = _hex_at(data, at, end, l, 0)
            ok = at >= 0 and end - at == suffix.size
            for k in range(suffix.size if ok else 0):
                ok = ok and data[at + k] == suffix[k]
        out[i] = ok
        start = end


class PlacedPaths(PathRows):
    """Row i: ``prefixes[group[i]]`` + (the stored path of row i when ``stored`` holds i, else
    index_relpath(scope[i], ledger[i]))."""

    def __init__(self, scope: np.ndarray, ledger: np.ndarray, stored: np.ndarray, column: PathColumn,
                 prefixes: Sequence[str] = ("",), group: np.ndarray | None = None):
        self.scope, self.ledger, self.stored, self.column = scope, ledger, stored, column
        self.prefixes, self.group = list(prefixes), group

    def prefixed(self, prefixes: Sequence[str], group: np.ndarray) -> PlacedPaths:
        return PlacedPaths(self.scope, self.ledger, self.stored, self.column, prefixes, group)

    def __len__(self) -> int:
        return len(self.scope)

    def _row(self, i: int) -> str:
        j = int(np.searchsorted(self.stored, i))
        stored = j < len(self.stored) and int(self.stored[j]) == i
        rel = self.column[j] if stored else index_relpaths([int(self.scope[i])], [int(self.ledger[i])])[0]
        return (self.prefixes[0] if self.group is None else self.prefixes[int(self.group[i])]) + rel

    def block(self, lo: int, hi: int) -> list[str]:
        """Rows ``lo`` to ``hi`` as strings."""
        hi = min(hi, len(self))
        if hi <= lo:
            return []
        out = index_relpaths(self.scope[lo:hi].tolist(), self.ledger[lo:hi].tolist())
        a, b = np.searchsorted(self.stored, [lo, hi]).tolist()
        for j, row in zip(range(a, b), self.stored[a:b].tolist()):
            out[row - lo] = self.column[j]
        if self.group is None:
            p = self.prefixes[0]
            return [p + x for x in out] if p else out
        pre = self.prefixes
        return [pre[g] + x for g, x in zip(self.group[lo:hi].tolist(), out)]

    def __repr__(self) -> str:
        return f"PlacedPaths({len(self)} paths, {len(self.stored)} stored)"


def placed_paths(relpaths: PathColumn, files: np.ndarray) -> PlacedPaths | PathColumn:
    """``relpaths`` (a walk's, one per row of ``files``) keeping only the rows not at their ledger's
    path; unchanged where paths are not "/"-separated."""
    if os.sep != "/" or relpaths.group is not None or relpaths.prefixes != [""]:
        return relpaths
    placed = np.zeros(len(relpaths), bool)
    if len(relpaths):
        _placed(relpaths.data, relpaths.ends, files["scope"], files["ledger"], files["named"], _SUFFIX, placed)
    stored = np.flatnonzero(~placed)
    ends = relpaths.ends
    starts = np.where(stored > 0, ends[np.maximum(stored - 1, 0)], 0).astype(np.int64)
    kept_ends = np.cumsum(ends[stored] - starts).astype(np.int64)
    data = np.empty(int(kept_ends[-1]) if len(kept_ends) else 0, relpaths.data.dtype)
    _copy_rows(relpaths.data, starts, ends[stored], data)   # (no index per byte: a row's bytes at once)
    return PlacedPaths(files["scope"], files["ledger"], stored, PathColumn(data, kept_ends))


@kernel
def _copy_rows(data, starts, ends, out):
    """The bytes [starts[j], ends[j]) of ``data`` for each j, one after another into ``out``."""
    at = 0
    for j in range(starts.size):
        for k in range(starts[j], ends[j]):   # (a slice assignment's shape check would load numba's arrays)
            out[at] = data[k]
            at += 1
