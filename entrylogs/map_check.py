"""An entry log's ledgers map against the log it closes: the ledgers whose size in the map differs
from the sum of their entries (fsck's LEDGERS_MAP_MISMATCH, ``bkdisk space --scan``'s warning), and
what the map claims beyond the bytes the log holds before it (``bkdisk space`` without a scan)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.ledgers_map import map_columns
from bkdisk.entrylogs.map_sums import MapCounter, map_rows
from bkdisk.entrylogs.scan_parts import entry_ledger_sums
from bkdisk.formats.entrylog import HEADER_SIZE
from bkdisk.formats.ids import LedgerId

MAP_DIFFERENCES_SHOWN = 5   # ledgers a warning names, each once, before "N more"


def claimed_beyond(ledgers_map: Mapping[tuple[int, int], int], map_offset: int) -> int:
    """Bytes the map gives its ledgers beyond what the log holds between its header and the map (every
    entry with its size prefix is there); 0 when the map claims no more. A map that claims more
    cannot be true of any entry it counts."""
    try:
        claimed = int(np.sum(map_columns(ledgers_map)[2], dtype=object))
    except (OverflowError, ValueError):   # a size past 64 bits
        claimed = sum(ledgers_map.values())
    return max(0, claimed - (map_offset - HEADER_SIZE))


def names_negative_bytes(ledgers_map: Mapping[tuple[int, int], int]) -> bool:
    """Whether the map gives a ledger fewer than zero bytes: false of any entry, as a claim beyond the
    log is, though it makes the map's total smaller."""
    try:
        return bool((map_columns(ledgers_map)[2] < 0).any())
    except (OverflowError, ValueError):   # a size past 64 bits
        return any(v < 0 for v in ledgers_map.values())


def impossible_claims(scan: EntryLogArrays) -> list[str]:
    """What the ledgers map of a scanned log (its ``ledgers_map``, ``map_error`` and ``header``) says that no
    entry can make true, each as a predicate of "the ledgers map" (``bkdisk inventory`` warns of them,
    ``bkdisk dump entrylog`` ends with them as damage); none for a map that could be true, or none parsed."""
    m, h = scan.ledgers_map, scan.header
    if m is None or scan.map_error is not None or h is None or not h.ledgers_map_offset:
        return []
    beyond = claimed_beyond(m, h.ledgers_map_offset)
    said = [f"claims {beyond} bytes more than the log holds before it"] if beyond else []
    if names_negative_bytes(m):
        said.append("gives a ledger fewer than zero bytes")
    return said


def map_differences(scan: EntryLogArrays) -> list[tuple[tuple[int, int], int | None, int | None]]:
    """The ledgers whose size in the log's ledgers map differs from the sum of their entries, by
    (scope, ledger): (ledger, the map's size, the entries' sum), None where one side lacks the ledger.
    The entries are counted into the map's rows (entrylogs.map_sums) when the map names each of their
    ledgers, else both sides are compared as sorted arrays: a log of a million ledgers makes no dict
    of them."""
    ledgers_map = scan.ledgers_map
    assert ledgers_map is not None, "a scan of a log with a ledgers map"
    n = len(ledgers_map)
    try:
        m_scope, m_ledger, m_size = map_rows(ledgers_map)
    except (OverflowError, ValueError):   # a size past 64 bits: compared as Python ints
        got = scan.computed_ledgers_map()
        return [(k, ledgers_map.get(k), got.get(k)) for k in sorted(set(ledgers_map) | set(got))
                if ledgers_map.get(k) != got.get(k)]
    # (counted by the scan as it went, when it was asked to: else the entries are read here)
    counted = getattr(scan, "map_counts", None)
    if counted is None:
        counted = MapCounter(m_scope, m_ledger, m_size).add_parts(scan).counts()
    if counted is not None:   # every entry's ledger is in the map: its rows are the ledgers of both sides
        m_scope, m_ledger, m_size, sums, counts = counted
        return [((int(m_scope[i]), int(m_ledger[i])), int(m_size[i]), int(sums[i]) if counts[i] else None)
                for i in np.flatnonzero((sums != m_size) | (counts == 0)).tolist()]
    e_scope, e_ledger, e_sum = (a.astype(t) for a, t in zip(entry_ledger_sums(scan), (np.uint64, np.uint64, np.int64)))
    if len(e_scope) == n and np.array_equal(e_scope, m_scope) and np.array_equal(e_ledger, m_ledger) \
            and np.array_equal(e_sum, m_size):
        return []
    # The ledgers of either side, in (scope, ledger) order; a ledger is on a side at most once.
    scope = np.concatenate([m_scope, e_scope])
    ledger = np.concatenate([m_ledger, e_ledger])
    size = np.concatenate([m_size, e_sum])
    side = np.concatenate([np.zeros(n, np.int8), np.ones(len(e_scope), np.int8)])
    order = np.lexsort((side, ledger, scope))
    scope, ledger, size, side = scope[order], ledger[order], size[order], side[order]
    pair = np.zeros(len(scope), bool)   # row i and i + 1 are one ledger's map size and sum
    pair[:-1] = (scope[1:] == scope[:-1]) & (ledger[1:] == ledger[:-1])
    same = np.zeros(len(scope), bool)
    same[:-1] = pair[:-1] & (size[1:] == size[:-1])
    first = np.ones(len(scope), bool)
    first[1:] = ~pair[:-1]
    out: list[tuple[tuple[int, int], int | None, int | None]] = []
    for i in np.flatnonzero(first & ~same).tolist():
        key = (int(scope[i]), int(ledger[i]))
        if pair[i]:
            out.append((key, int(size[i]), int(size[i + 1])))
        elif side[i] == 0:
            out.append((key, int(size[i]), None))
        else:
            out.append((key, None, int(size[i])))
    return out


def map_warning(path: str, beyond: int, differ: list[tuple[tuple[int, int], int | None, int | None]]) -> str:
    """A ledgers map the entries contradict, each ledger named once with both sizes (the map's, the
    entries' sum; size prefixes included, as the map counts them)."""
    shown = differ[:MAP_DIFFERENCES_SHOWN]
    named = "; ".join(f"ledger {LedgerId(*k)}: map {'-' if a is None else a}, entries {'-' if b is None else b}"
                      for k, a, b in shown)
    if len(differ) > len(shown):
        named += f"; {len(differ) - len(shown)} more ledgers"
    claims = f"claims {beyond} bytes more than the log holds before it" if beyond else ""
    what = " and ".join(x for x in (claims, f"disagrees with the entries ({named})" if differ else "") if x)
    return f"{path}: the ledgers map {what}; counted from the entries (bookie-fsck: LEDGERS_MAP_MISMATCH)"
