"""Digest verification of scanned entries, straight from the mapped file bytes."""
from __future__ import annotations

import numpy as np

from formats.digests import DIGEST_LENGTH, DigestType, compute_digest
from formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE
from formats.ids import LedgerId


def verify_entries(arr: np.ndarray, entries: np.ndarray, types: dict[LedgerId, DigestType | None],
                   passwords: dict[LedgerId, bytes]) -> np.ndarray:
    """Indices of ``entries`` whose stored digest does not match.

    ``arr`` is the whole file's bytes; ``entries`` an ENTRY_DTYPE array. V1 entries use their
    ledger's type from ``types`` (None: not verified); V2 entries name their own type. HMAC is
    verified only where ``passwords`` has the ledger.
    """
    bad = []
    mv = memoryview(arr)
    off = entries["offset"]
    size = entries["size"]
    fmt = entries["format"]
    scope = entries["scope"]
    ledger = entries["ledger"]
    for i in range(len(entries)):
        lid = LedgerId(int(scope[i]), int(ledger[i]))
        s = int(off[i]) + 4
        n = int(size[i])
        if fmt[i] == 2:
            dt = DigestType(arr[s] & 0x0F)
            hs = ENTRY_V2_HEADER_SIZE
        else:
            dt = types.get(lid)
            hs = ENTRY_V1_HEADER_SIZE
        if dt is None or dt == DigestType.DUMMY:
            continue
        pw = passwords.get(lid)
        if dt == DigestType.HMAC and pw is None:
            continue
        d = DIGEST_LENGTH[dt]
        if n < hs + d:
            bad.append(i)
            continue
        want = compute_digest(dt, mv[s:s + hs], mv[s + hs + d:s + n], pw)
        if want != mv[s + hs:s + hs + d]:
            bad.append(i)
    return np.array(bad, dtype=np.int64)
