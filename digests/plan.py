"""What is known and learned of each ledger's digest type, across files and windows: ``DigestPlan``.

Types come from ledger metadata, from V2 entries' flags, or from sniffing (digests/verify.py tries a
ledger's entries until one verifies); a ledger whose type stays unknown may still have its digest
length inferred from the entries' cumulative lengths. A plan may be shared by threads (fsck
``--jobs``): its lock guards every read-modify-write of its tables.
"""
from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bkdisk.digests.decision_table import DecisionTable, LedgerKey
from bkdisk.digests.ledger_values import LedgerValues
from bkdisk.diskio import config
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType, mac_key
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE

SOURCE_NONE, SOURCE_GIVEN, SOURCE_SNIFFED, SOURCE_ENTRY = 0, 1, 2, 3
SOURCE_NAMES = {SOURCE_NONE: None, SOURCE_GIVEN: "metadata", SOURCE_SNIFFED: "sniffed", SOURCE_ENTRY: "entry"}
# digest lengths a V1 entry's sizes may imply (for ledgers whose type stays unknown)
_PLAUSIBLE_DIGEST_LENGTHS = tuple(sorted(set(DIGEST_LENGTH.values())))




@dataclass
class DigestPlan:
    """What is known about each ledger's digest, and what sniffing found; shared across files.

    ``known``: digest types from ledger metadata; ``passwords``: ledger passwords (for HMAC).
    ``force``: check every V1 entry as this type (benchmarks). ``sniff``: sniff the type of ledgers
    not in ``known``: each of a ledger's entries is tried (CRC32C, then CRC32, then HMAC when the
    password is known) until one verifies, which decides the ledger's type; a ledger is decided
    unknown only after ``max_samples`` entries of it verified as nothing. So a ledger whose first
    entries are corrupt is still decided by a later intact entry, in a later window or file.

    Entries checked while their ledger was undecided come out DIGEST_UNKNOWN (type 0). Within one
    ``verify_entry_digests`` call, and within one ``scan_entry_log`` (every window of the file),
    they are re-verified once the ledger is decided, so they end OK or BAD. Across calls or files
    the caller re-verifies them: ``digests.verify.recheck_digests(scan, plan)`` does it for a finished
    EntryLogScanArrays (``verify_entry_digests`` with this plan on those entries does it for any entry array).
    """

    # (dicts, or LedgerValues: a million ledgers' metadata as columns)
    known: Mapping[LedgerKey, DigestType] = field(default_factory=dict)
    passwords: Mapping[LedgerKey, bytes] = field(default_factory=dict)
    sniff: bool = True
    max_samples: int = 64
    force: DigestType | None = None
    crc_variant: int = field(default_factory=config.crc_variant)
    # -> (type code, source); a dict given is taken into a DecisionTable
    decided: DecisionTable = field(default_factory=DecisionTable)
    tried: dict[LedgerKey, int] = field(default_factory=dict)                 # entries sniffed, none verified
    dlen_hint: dict[LedgerKey, int] = field(default_factory=dict)
    _mac_keys: dict[LedgerKey, bytes] = field(default_factory=dict, repr=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    # known as arrays: name -> (id of the dict, its length then, (ids, values))
    _tables: dict[str, tuple[int, int, tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict, repr=False,
                                                                                compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.decided, DecisionTable):
            self.decided = DecisionTable(dict(self.decided))

    def __getstate__(self) -> dict:   # picklable (a lock is not): a copy gets a lock of its own
        state = dict(self.__dict__)
        del state["lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, lock=threading.RLock())

    def decided_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``decided`` for scope 0 (V1 ledgers) as arrays: sorted ledger ids, (type code, source) rows.

        The table's own arrays, recent decisions merged in."""
        return self.decided.table()

    def known_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``known`` for scope 0 as arrays: sorted ledger ids, type codes."""
        return self._table("known", self.known, int)

    def _table(self, name: str, d: Mapping, value) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(d, LedgerValues):
            return d.scope0_table(value)
        cached = self._tables.get(name)
        if cached is not None and cached[:2] == (id(d), len(d)):
            return cached[2]
        # Dicts keep insertion order and these only grow: new items are the last ones, merged in (no rebuild).
        start = cached[1] if cached is not None and cached[0] == id(d) and cached[1] < len(d) else 0
        keys = np.array(list(itertools.islice(d.keys(), start, None)), dtype=np.uint64).reshape(-1, 2)
        values = np.array([value(v) for v in itertools.islice(d.values(), start, None)], dtype=np.uint8)
        v1, order = keys[:, 0] == 0, np.argsort(keys[:, 1], kind="stable")   # scope 0 only, by ledger id
        order = order[v1[order]]
        ids, values = keys[order, 1], values[order]
        if start and cached is not None:
            at = np.searchsorted(cached[2][0], ids)
            ids, values = np.insert(cached[2][0], at, ids), np.insert(cached[2][1], at, values, axis=0)
        self._tables[name] = (id(d), len(d), (ids, values))
        return ids, values

    def ledger_digest(self, key: LedgerKey) -> tuple[DigestType | None, str | None]:
        """A V1 ledger's digest type as decided so far and where it came from."""
        code, src = self.decided.get(key, (0, SOURCE_NONE))
        return (DigestType(code) if code else None), SOURCE_NAMES[src]

    def mac_key_for(self, key: LedgerKey) -> bytes | None:
        with self.lock:
            k = self._mac_keys.get(key)
            if k is None and key in self.passwords:
                k = self._mac_keys[key] = mac_key(self.passwords[key])
            return k


def learn_digest_length_hints(plan: DigestPlan, uled, lcode, inv, v1, size, entry, length) -> None:
    """For ledgers whose type stays unknown, infer the digest length from the cumulative lengths.

    An entry's payload is ``length - previous length`` (``length`` itself for entry 0), so the digest
    takes ``size - header - payload`` bytes. Only the lengths of a digest type are accepted.
    """
    todo = (lcode == 0) & np.array([(0, int(l)) not in plan.dlen_hint for l in uled.tolist()], dtype=bool)
    unk = np.flatnonzero(todo[inv])
    if len(unk) == 0:
        return
    idx = v1[unk]
    g = inv[unk]
    order = np.lexsort((entry[idx], g))
    idx, g = idx[order], g[order]
    e = entry[idx]
    payload = length[idx].copy()
    prev_ok = np.zeros(len(idx), bool)
    prev_ok[1:] = (g[1:] == g[:-1]) & (e[1:] == e[:-1] + 1)
    payload[1:] = np.where(prev_ok[1:], length[idx][1:] - length[idx][:-1], payload[1:])
    usable = (e == 0) | prev_ok
    d = size[idx].astype(np.int64) - ENTRY_V1_HEADER_SIZE - payload
    good = np.flatnonzero(usable & np.isin(d, _PLAUSIBLE_DIGEST_LENGTHS))
    groups, first = np.unique(g[good], return_index=True)
    for j, k in zip(groups.tolist(), good[first].tolist()):
        plan.dlen_hint.setdefault((0, int(uled[j])), int(d[k]))
