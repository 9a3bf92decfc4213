"""A journal's digests checked from the digest facts its scan took give what a check of its bytes gives:
the same bad records, the same decisions in the digest plan, window by window; the kernel that settles
a window of decided ledgers from the facts alone gives what its reference twin gives."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bkdisk.digests.id_slots import id_slots_room
from bkdisk.digests.kernels import (
    FACT_CODE_SHIFT,
    FACT_V2,
    digests_from_facts,
    digests_from_facts_reference,
)
from bkdisk.digests.plan import SOURCE_SNIFFED, DigestPlan
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import build_entry, package_entry
from bkdisk.journal import digests as journal_digests
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


# (size, ledger, V2, V2 code, CRC32C bits): drawn so that most lists settle (one entry that does not
# leaves a whole list to the general check) and sizes reach every header and digest boundary.
facts_rows = st.lists(st.tuples(st.integers(0, 90), st.sampled_from([1, 2, 3, 1, 2, 3, 4, 4]), st.booleans(),
                                st.sampled_from([3, 3, 4, 0, 1, 2, 5]), st.sampled_from([1, 2, 1, 2, 0])),
                      min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(rows=facts_rows, codes=st.lists(st.tuples(st.sampled_from([3, 3, 4, 0, 1, 2]), st.integers(0, 3)), min_size=2,
                                       max_size=2),
       known=st.sets(st.sampled_from([3, 4])), samples=st.sampled_from([0, 1, 2, 64]), others=st.integers(0, 20))
@example(rows=[(100, 3, False, 0, 1), (100, 1, False, 0, 1), (100, 3, False, 0, 1)], codes=[(3, 1), (3, 1)],
         known=set(), samples=64, others=0)   # ledger 3 met again after its run
@example(rows=[(100, 3, False, 0, 2), (100, 3, False, 0, 1)], codes=[(3, 1), (3, 1)], known=set(), samples=1,
         others=9)
@example(rows=[(100, 3, False, 0, 2), (100, 4, True, 3, 1), (100, 3, False, 0, 1)], codes=[(3, 1), (3, 1)],
         known=set(), samples=2, others=0)   # a V2 entry within a run
def test_digests_from_facts_equal_their_reference(rows, codes, known, samples, others):
    """Ledgers 1 and 2 decided, 3 and 4 met first (sniffed unless known or not allowed); ``others``
    ledgers decided that no entry names (more decided ledgers than entries: the kernel's table is of
    the ledgers met, else of every decided one)."""
    size = np.array([r[0] for r in rows], np.int64)
    ledger = np.array([r[1] for r in rows], np.uint64)
    v2 = np.array([r[2] for r in rows])
    facts = np.array([(FACT_V2 | r[3] << FACT_CODE_SHIFT if r[2] else 0) | r[4] for r in rows], np.uint8)
    decided = dict(zip(range(1, 3), codes)) | {lid: (3, 1) for lid in range(1000, 1000 + others)}
    ids = np.array(sorted(decided), np.uint64)
    table = np.array([decided[int(i)] for i in ids], np.uint8).reshape(-1, 2)
    got = tuple(np.zeros(len(rows), t) for t in (np.uint8, np.uint8, np.uint8, np.int64))
    sniffed = np.zeros(len(rows), np.uint64)
    k = digests_from_facts(size, v2, ledger, facts, ids, table, *id_slots_room(min(len(ids), len(rows))),
                           np.array(sorted(known), np.uint64), samples, *got, sniffed)
    want = digests_from_facts_reference(size, v2, ledger, facts, decided, known, samples)
    settled = k >= 0 and len(set(sniffed[:k].tolist())) == k   # (a ledger listed twice: refused by the caller)
    assert settled == (want is not None)
    if want is not None:
        assert [g.tolist() for g in got] == [w.tolist() for w in want[0]]
        assert sniffed[:k].tolist() == want[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=ledgers, recs=records, window=st.sampled_from([4096, 1 << 20]))
def test_facts_check_of_decided_ledgers_equals_bytes_check(tmp_path, kinds, recs, window, monkeypatch):
    """Ledgers decided before the journal's check (by the entry logs'): the facts settle CRC32C and
    DUMMY ledgers without the general check, and give the bad records the bytes give."""
    path = str(tmp_path / "1.txn")
    _write(path, kinds, recs)
    with_facts = scan_journal(path, window=window, digest_facts=True)
    without = scan_journal(path, window=window)
    a, b = _plan(kinds), _plan(kinds)
    for plan in (a, b):
        plan.decided.update({(0, i + 1): (int(t), SOURCE_SNIFFED) for i, (t, _v2, _k) in enumerate(kinds)})
    general = []
    real = journal_digests.verify_entry_digests
    with monkeypatch.context() as m:   # (undone after each example: wrappers never pile up)
        m.setattr(journal_digests, "verify_entry_digests", lambda *x, **k: general.append(1) or real(*x, **k))
        got = bad_data_records(with_facts, a, window)
    settled_by_facts = not general
    want = bad_data_records(without, b, window)
    assert got.tolist() == want.tolist()
    assert (a.tried, a.dlen_hint) == (b.tried, b.dlen_hint)
    if all(t in (DigestType.CRC32C, DigestType.DUMMY) for t, _v2, _k in kinds):
        assert settled_by_facts
