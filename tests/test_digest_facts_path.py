"""The digests settled from the entries' facts (digests.verify.digests_by_facts) against the general
check, window after window over one plan: the same rows and the same plan afterwards (decisions,
ledgers tried, digest-length hints), whatever the plan held before (decided, known, tried ledgers,
passwords, sniffing off, a forced type, any number of samples)."""
from __future__ import annotations

import copy

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bkdisk.digests import verify as D
from bkdisk.digests.kernels import entry_facts
from bkdisk.digests.plan import DigestPlan
from bkdisk.digests.verify import verify_entry_digests
from bkdisk.diskio.config import crc_variant
from bkdisk.entrylogs.arrays import ENTRY_DTYPE
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import V2_MARKER, build_entry, package_entry
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

PASSWORD = b"pw"
LEDGERS = [1, 2, 3, 4, 5]
TYPES = [DigestType.CRC32C, DigestType.CRC32, DigestType.DUMMY, DigestType.HMAC]
NO_DAMAGE, LAST_BYTE, HEADER_BYTE = 0, 1, 2


def _records(rows) -> tuple[np.ndarray, np.ndarray]:
    """The stored records of ``rows`` ((ledger, v2, type, payload bytes, damage, bytes cut), entry ids
    counted per ledger) one after another, and their entries (ENTRY_DTYPE)."""
    chunks, ents, pos, next_entry = [], [], 0, {}
    for ledger, v2, dtype, plen, damage, cut in rows:
        eid = next_entry.get(ledger, 0)
        next_entry[ledger] = eid + 1
        e = package_entry(ledger_id=ledger, entry_id=eid, last_add_confirmed=eid - 1, length=plen * (eid + 1),
                          payload=bytes((ledger + k) % 256 for k in range(plen)), digest_type=dtype,
                          password=PASSWORD, format_version=2 if v2 else 1)
        body = bytearray(build_entry(e))
        if damage == LAST_BYTE:
            body[-1] ^= 0x40
        elif damage == HEADER_BYTE and len(body) > 40:
            body[30] ^= 1
        if cut:
            body = body[:max(1, len(body) - cut)]
        ents.append((pos, len(body), 2 if body[0] >= V2_MARKER else 1, 0, ledger, eid, eid - 1, plen * (eid + 1)))
        chunks.append(len(body).to_bytes(SIZE_PREFIX_SIZE, "big") + bytes(body))
        pos += SIZE_PREFIX_SIZE + len(body)
    return np.frombuffer(b"".join(chunks) + bytes(64), np.uint8), np.array(ents, ENTRY_DTYPE)


def _plan_state(p: DigestPlan):
    ids, rows = p.decided_table()
    return ids.tolist(), rows.tolist(), dict(p.decided.scoped), dict(p.tried), dict(p.dlen_hint)


row = st.tuples(st.sampled_from(LEDGERS), st.booleans(), st.sampled_from(TYPES), st.integers(0, 40),
                st.sampled_from([NO_DAMAGE] * 3 + [LAST_BYTE, HEADER_BYTE]),
                st.sampled_from([0, 0, 0, 0, 1, 3, 8, 30]))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(row, min_size=1, max_size=40), cuts=st.lists(st.integers(1, 40), max_size=4),
       decided=st.dictionaries(st.sampled_from(LEDGERS), st.tuples(st.integers(0, 4), st.integers(0, 3)),
                               max_size=3),
       known=st.dictionaries(st.sampled_from(LEDGERS), st.sampled_from(TYPES), max_size=2),
       tried=st.dictionaries(st.sampled_from(LEDGERS), st.integers(1, 3), max_size=1),
       passwords=st.sets(st.sampled_from(LEDGERS)), sniff=st.sampled_from([True, True, True, False]),
       force=st.sampled_from([None] * 6 + [DigestType.CRC32C, DigestType.CRC32]),
       max_samples=st.sampled_from([0, 1, 2, 3, 64]),
       max_crc=st.sampled_from([1 << 30, 60]))
@example(rows=[(1, False, DigestType.CRC32C, 10, LAST_BYTE, 0), (1, False, DigestType.CRC32C, 10, NO_DAMAGE, 0)],
         cuts=[], decided={}, known={}, tried={1: 1}, passwords=set(), sniff=True, force=None, max_samples=2,
         max_crc=1 << 30)   # a ledger tried before: its samples left are fewer
@example(rows=[(1, False, DigestType.CRC32C, 10, NO_DAMAGE, 0)], cuts=[], decided={}, known={}, tried={},
         passwords=set(), sniff=False, force=None, max_samples=2, max_crc=1 << 30)   # sniffing off
@example(rows=[(1, False, DigestType.CRC32C, 10, NO_DAMAGE, 0)], cuts=[], decided={}, known={}, tried={},
         passwords=set(), sniff=True, force=DigestType.CRC32, max_samples=2, max_crc=1 << 30)   # a forced type
def test_facts_settle_what_the_general_check_gives(rows, cuts, decided, known, tried, passwords, sniff, force,
                                                    max_samples, max_crc):
    kinds: dict[int, tuple[bool, DigestType]] = {}   # one format and type per ledger, as a writer gives
    rows = [(lid, *kinds.setdefault(lid, (v2, dt)), plen, dmg, cut) for lid, v2, dt, plen, dmg, cut in rows]
    buf, ents = _records(rows)
    base = DigestPlan(known={(0, k): v for k, v in known.items()}, passwords={(0, k): PASSWORD for k in passwords},
                      sniff=sniff, max_samples=max_samples, decided={(0, k): v for k, v in decided.items()},
                      tried={(0, k): v for k, v in tried.items()}, force=force)
    facts = np.array([entry_facts(buf, int(o) + SIZE_PREFIX_SIZE, int(s), crc_variant(), max_crc)
                      for o, s in zip(ents["offset"], ents["size"])], np.uint8)
    by_facts, general = copy.deepcopy(base), copy.deepcopy(base)
    real = D.digests_by_facts
    bounds = sorted({0, len(ents), *(c for c in cuts if c < len(ents))})
    for lo, hi in zip(bounds, bounds[1:]):
        want, _ = _general(buf, ents[lo:hi], general, facts[lo:hi])
        got, _ = verify_entry_digests(buf, ents[lo:hi], by_facts, facts=facts[lo:hi])
        assert got.tolist() == want.tolist()
        assert _plan_state(by_facts) == _plan_state(general)
    assert D.digests_by_facts is real


def _general(buf, ents, plan, facts):
    """verify_entry_digests with the facts' path refused, so the general check decides every entry."""
    real = D.digests_by_facts
    D.digests_by_facts = lambda *a: None
    try:
        return verify_entry_digests(buf, ents, plan, facts=facts)
    finally:
        D.digests_by_facts = real


def test_the_facts_path_settles_a_clean_ledger():
    """The comparison above is not empty: a clean CRC32C ledger's part is settled from its facts."""
    buf, ents = _records([(1, False, DigestType.CRC32C, 20, NO_DAMAGE, 0)] * 5)
    facts = np.array([entry_facts(buf, int(o) + SIZE_PREFIX_SIZE, int(s), crc_variant(), 1 << 30)
                      for o, s in zip(ents["offset"], ents["size"])], np.uint8)
    plan = DigestPlan(max_samples=2)
    settled = D.digests_by_facts(plan, ents["size"], ents["format"] == 2, ents["ledger"], facts)
    assert settled is not None
    assert settled[2].tolist() == [D.DIGEST_OK] * 5
    assert plan.decided_table()[1].tolist() == [[int(DigestType.CRC32C), D.SOURCE_SNIFFED]]


def test_the_facts_path_settles_a_crc32_ledger():
    """A ledger whose digest is CRC32 (about one in ten of a cluster's) is settled from its facts too, a
    damaged entry bad: its bytes need no second read (the journal's check maps no window for it)."""
    rows = [(1, False, DigestType.CRC32, 20, NO_DAMAGE, 0)] * 2 + [(1, False, DigestType.CRC32, 20, LAST_BYTE, 0)] \
        + [(1, False, DigestType.CRC32, 20, HEADER_BYTE, 0), (1, False, DigestType.CRC32, 0, NO_DAMAGE, 0)]
    buf, ents = _records(rows)
    facts = np.array([entry_facts(buf, int(o) + SIZE_PREFIX_SIZE, int(s), crc_variant(), 1 << 30)
                      for o, s in zip(ents["offset"], ents["size"])], np.uint8)
    plan = DigestPlan(decided={(0, 1): (int(DigestType.CRC32), D.SOURCE_SNIFFED)})
    settled = D.digests_by_facts(plan, ents["size"], ents["format"] == 2, ents["ledger"], facts)
    assert settled is not None
    assert settled[2].tolist() == [D.DIGEST_OK, D.DIGEST_OK, D.DIGEST_BAD, D.DIGEST_BAD, D.DIGEST_OK]
    assert settled[2].tolist() == _general(buf, ents, copy.deepcopy(plan), facts)[0]["status"].tolist()
