"""A journal's digests checked from the digest facts its scan took give what a check of its bytes gives:
the same bad records, the same decisions in the digest plan, window by window."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.diskio.digests import DigestPlan
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import build_entry, package_entry
from bkdisk.journal.digests import bad_data_records
from bkdisk.journal.scan import scan_journal
from bkdisk.journal.writer import JournalWriter

PASSWORD = b"secret"
TYPES = [DigestType.CRC32C, DigestType.CRC32, DigestType.DUMMY, DigestType.HMAC]

ledgers = st.lists(st.tuples(st.sampled_from(TYPES), st.booleans(), st.booleans()), min_size=1, max_size=6)
records = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 300), st.integers(0, 4)), min_size=1, max_size=60)


def _write(path: str, kinds, recs) -> None:
    next_entry = [0] * len(kinds)
    with JournalWriter(path, group_bytes=1024) as w:
        for which, payload_len, damage in recs:
            li = which % len(kinds)
            dtype, v2, _password_known = kinds[li]
            e = package_entry(ledger_id=li + 1, entry_id=next_entry[li], last_add_confirmed=next_entry[li] - 1,
                              length=payload_len, payload=bytes((li + k) % 256 for k in range(payload_len)),
                              digest_type=dtype, password=PASSWORD, format_version=2 if v2 else 1)
            next_entry[li] += 1
            body = bytearray(build_entry(e))
            if damage == 1:           # a flipped byte of the payload or digest
                body[-1] ^= 0x40
            elif damage == 2 and len(body) > 40:
                body[30] ^= 0x01
            w.append(bytes(body))


def _plan(kinds) -> DigestPlan:
    return DigestPlan(passwords={(0, i + 1): PASSWORD for i, (_t, _v2, known) in enumerate(kinds) if known},
                      max_samples=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=ledgers, recs=records, window=st.sampled_from([4096, 1 << 20]))
def test_facts_check_equals_bytes_check(tmp_path, kinds, recs, window):
    path = str(tmp_path / "1.txn")
    _write(path, kinds, recs)
    with_facts = scan_journal(path, window=window, digest_facts=True)
    without = scan_journal(path, window=window)
    assert without.digest_facts is None and len(with_facts.digest_facts) == len(with_facts.records)
    a, b = _plan(kinds), _plan(kinds)
    got = bad_data_records(with_facts, a, window)
    want = bad_data_records(without, b, window)
    assert got.tolist() == want.tolist()
    for t in (0, 1):
        assert np.array_equal(a.decided_table()[t], b.decided_table()[t])
    assert (a.tried, a.dlen_hint) == (b.tried, b.dlen_hint)
