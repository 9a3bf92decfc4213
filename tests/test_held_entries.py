"""Pass 7's entries held per ledger: rows of many interleaved ledgers grouped by one sort."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.passes.p7_metadata import _add_per_ledger

U64 = st.integers(0, 2**64 - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2**63 + 5]), st.sampled_from([0, 7, 2**63, 2**64 - 1]) | U64,
                          st.integers(-1, 10**6)), max_size=300),
       st.integers(1, 4))
def test_rows_of_interleaved_ledgers_are_each_ledgers_entries(rows, parts):
    scope = np.array([r[0] for r in rows], np.uint64)
    ledger = np.array([r[1] for r in rows], np.uint64)
    entry = np.array([r[2] for r in rows], np.int64)
    out: dict[LedgerId, list[np.ndarray]] = {}
    # in parts, as the logs' scans and the journal's pending rows add to one dict
    for cut in np.array_split(np.arange(len(rows)), parts):
        _add_per_ledger(out, scope[cut], ledger[cut], entry[cut])
    want: dict[LedgerId, list[int]] = {}
    for s, lg, e in rows:
        want.setdefault(LedgerId(s, lg), []).append(e)
    assert {k: sorted(np.concatenate(v).tolist()) for k, v in out.items()} == {k: sorted(v) for k, v in want.items()}
    assert all(v.dtype == np.int64 for parts_ in out.values() for v in parts_)
