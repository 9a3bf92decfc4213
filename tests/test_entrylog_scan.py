"""The jitted entry-log scanner against its reference twin, the golden corpora and the writer's bytes."""
from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.digests.kernels import DIGEST_BAD, DIGEST_OK, DIGEST_UNKNOWN
from bkdisk.digests.plan import SOURCE_ENTRY, SOURCE_GIVEN, SOURCE_SNIFFED, DigestPlan
from bkdisk.digests.verify import recheck_digests, verify_entry_digests
from bkdisk.diskio.scan_sink import Room, ScanSink
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.entrylogs.arrays import scan_entry_log_reference
from bkdisk.entrylogs.reader import Damage
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.scan_parts import ChunkedLogScan, recheck
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType, compute_digest
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE, V2_DIGEST_MASK, V2_FLAGS_AT
from bkdisk.formats.entrylog import HEADER_SIZE, SIZE_PREFIX_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import unpack_location

SINGLE = ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage", "dbstorage-v6-bookieid"]


def _corpora() -> list[Path]:
    out = [GOLDEN / c for c in SINGLE] + sorted((GOLDEN / "cluster-3" / "bookies").glob("*"))
    return out if len(out) > len(SINGLE) else out + [GOLDEN / "cluster-3" / "bookies" / "<missing>"]


CORPORA = _corpora()
IDS = [str(c.relative_to(GOLDEN)) for c in CORPORA]


def _manifest(corpus: Path) -> dict:
    assert (corpus / "manifest.json").is_file(), f"golden corpus missing: {corpus}"
    return json.loads((corpus / "manifest.json").read_text())


def _logs(corpus: Path, doc: dict) -> list[tuple[str, Path]]:
    out = []
    for ld in doc["ledger_dirs"]:
        out += [(ld, p) for p in sorted((corpus / ld / "current").glob("*.log"))]
    assert out, f"no entry logs in {corpus}"
    return out


def assert_same_scan(got, want) -> None:
    """Every field the reference produces, record for record."""
    assert (got.path, got.log_id, got.size, got.data_end) == (want.path, want.log_id, want.size, want.data_end)
    assert got.header == want.header
    assert str(got.header_error) == str(want.header_error)
    assert got.ledgers_map == want.ledgers_map
    assert str(got.map_error) == str(want.map_error)
    assert got.entries.dtype == want.entries.dtype
    assert got.entries.tolist() == want.entries.tolist()
    assert got.problems.dtype == want.problems.dtype
    assert got.problems.tolist() == want.problems.tolist()


def test_golden_corpora_are_present():
    assert GOLDEN.is_dir(), f"golden folder missing: {GOLDEN}"
    for c in CORPORA:
        assert (c / "manifest.json").is_file(), f"golden corpus missing: {c}"
    assert len(CORPORA) == len(SINGLE) + 3


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_scan_equals_reference_and_manifest_on_golden_logs(corpus: Path):
    doc = _manifest(corpus)
    want = {}
    for r in doc["entry_log_records"]:
        want.setdefault((r["ledger_dir"], r["entry_log_file"]), []).append(
            (r["offset"], r["size"], int(r["ledger_id"]), r["entry_id"]))
    seen = 0
    for ld, log in _logs(corpus, doc):
        ref = scan_entry_log_reference(log)
        for kw in ({}, {"window": 4096}, {"window": 10_000}):
            got = scan_entry_log(log, **kw)
            assert_same_scan(got, ref)
        rows = [(int(e["offset"]), int(e["size"]), int(e["ledger"]), int(e["entry"])) for e in got.entries]
        assert rows == want.get((ld, log.name), [])
        assert len(got.problems) == 0 and got.map_error is None
        assert got.header_error is None or log.stat().st_size == 0
        if got.ledgers_map is not None:
            assert got.ledgers_map == got.computed_ledgers_map()
        seen += len(rows)
    assert seen == len(doc["entry_log_records"])


def _golden_plan(doc: dict) -> DigestPlan:
    return DigestPlan(known={(0, int(l["ledger_id"])): DigestType.parse(l["digest_type"]) for l in doc["ledgers"]},
                      passwords={(0, int(l["ledger_id"])): bytes.fromhex(l["password_hex"]) for l in doc["ledgers"]})


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_every_golden_entry_verifies_with_its_manifest_digest(corpus: Path):
    doc = _manifest(corpus)
    entries = {(int(e["ledger_id"]), e["entry_id"]): e for e in doc["entries"]}
    plan = _golden_plan(doc)
    n = 0
    for _, log in _logs(corpus, doc):
        s = scan_entry_log(log, digests=plan, payload_hash="sha256", window=8192)
        for e, d, h in zip(s.entries, s.digests, s.payload_hashes):
            m = entries[(int(e["ledger"]), int(e["entry"]))]
            assert DigestType(int(d["type"])).name == m["digest_type"]
            assert (int(d["status"]), int(d["source"])) == (DIGEST_OK, SOURCE_GIVEN)
            assert int(d["payload_len"]) == m["payload_length"]
            assert h == m["payload_sha256"]
            n += 1
    assert n == len(doc["entry_log_records"])


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_golden_digest_types_are_sniffed_when_no_metadata_is_given(corpus: Path):
    doc = _manifest(corpus)
    entries = {(int(e["ledger_id"]), e["entry_id"]): e for e in doc["entries"]}
    pw = {(0, int(l["ledger_id"])): bytes.fromhex(l["password_hex"]) for l in doc["ledgers"]}
    blind, with_pw = DigestPlan(), DigestPlan(passwords=pw)
    for _, log in _logs(corpus, doc):
        for plan in (blind, with_pw):
            s = scan_entry_log(log, digests=plan, payload_hash="sha256")
            for e, d, h in zip(s.entries, s.digests, s.payload_hashes):
                m = entries[(int(e["ledger"]), int(e["entry"]))]
                kind = m["digest_type"]
                if kind in ("CRC32", "CRC32C") or (kind == "HMAC" and plan is with_pw):
                    assert DigestType(int(d["type"])).name == kind
                    assert (int(d["status"]), int(d["source"])) == (DIGEST_OK, SOURCE_SNIFFED)
                else:  # HMAC without a password, DUMMY: nothing verifies, the type stays unknown
                    assert (int(d["type"]), int(d["status"])) == (0, DIGEST_UNKNOWN)
                # the digest length is inferred from the cumulative lengths, so the payload is found anyway
                assert int(d["payload_len"]) == m["payload_length"]
                assert h == m["payload_sha256"]
    for plan in (blind, with_pw):
        for l in doc["ledgers"]:
            dt, src = plan.ledger_digest((0, int(l["ledger_id"])))
            if l["digest_type"] in ("CRC32", "CRC32C") or (l["digest_type"] == "HMAC" and plan is with_pw):
                assert (dt.name, src) == (l["digest_type"], "sniffed")
            else:
                assert dt is None


# --- hypothesis-generated bookies ------------------------------------------------------------
def _payloads(draw_sizes):
    return st.lists(st.sampled_from(draw_sizes), min_size=1, max_size=6).map(
        lambda sizes: [random.Random(sum(sizes) + len(sizes)).randbytes(n) for n in sizes])


LEDGER = st.builds(
    LedgerSpec,
    ledger_id=st.integers(0, 2 ** 63 - 1),
    payloads=_payloads([0, 1, 7, 100, 333, 1500, 5000]),
    digest_type=st.sampled_from(list(DigestType)),
    password=st.binary(max_size=8),
    scope_id=st.sampled_from([0, 0, 1, 0xABCDEF, 2 ** 64 - 1]),
    entry_format=st.sampled_from([None, None, 2]),
)


def _spec(ledgers, limit, dirs) -> BookieSpec:
    seen, uniq = set(), []
    for l in ledgers:
        if l.lid not in seen:
            seen.add(l.lid)
            uniq.append(l)
    return BookieSpec(uniq, entry_log_size_limit=limit, ledger_dirs=[f"ledgers{i}" for i in range(dirs)],
                      write_journal=False)


BOOKIES = st.builds(_spec, st.lists(LEDGER, min_size=1, max_size=5), st.sampled_from([2048, 6000, 1 << 20]),
                    st.integers(1, 2))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=BOOKIES, window=st.sampled_from([4096, 5000, 1 << 20]))
def test_scan_equals_reference_and_writer_on_generated_bookies(spec: BookieSpec, window: int):
    with tempfile.TemporaryDirectory() as d:
        wb = write_bookie(spec, d)
        plan = DigestPlan(known={l.lid: l.digest_type for l in spec.ledgers},
                          passwords={l.lid: l.password for l in spec.ledgers})
        found = {}
        for log in wb.entry_log_files:
            s = scan_entry_log(log, window=window, digests=plan, payload_hash="sha256")
            assert_same_scan(s, scan_entry_log_reference(log))
            assert len(s.problems) == 0
            log_id = int(os.path.basename(log)[:-4], 16)
            for e, dg in zip(s.entries, s.digests):
                key = ((int(e["scope"]), int(e["ledger"])), int(e["entry"]))
                assert key not in found
                found[key] = ((log_id << 32) | (int(e["offset"]) + 4), dg)
        assert {k: v[0] for k, v in found.items()} == {(tuple(l), e): loc for (l, e), loc in wb.locations.items()}
        by_lid = {l.lid: l for l in spec.ledgers}
        for (lid, eid), (_, dg) in found.items():
            l = by_lid[lid]
            assert int(dg["status"]) == DIGEST_OK
            assert int(dg["type"]) == int(l.digest_type)
            assert int(dg["source"]) == (SOURCE_ENTRY if l.format_version == 2 else SOURCE_GIVEN)
            assert int(dg["payload_len"]) == len(l.payloads[eid - l.first_entry])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=BOOKIES, seed=st.integers(0, 2 ** 32 - 1))
def test_scan_equals_reference_under_random_damage(spec: BookieSpec, seed: int):
    rng = random.Random(seed)
    types = {l.lid: l.digest_type for l in spec.ledgers}
    passwords = {l.lid: l.password for l in spec.ledgers if rng.random() < 0.7}
    # some scope-0 ledgers' types are given (metadata), the others are sniffed from their entries
    given_ = {k: t for k, t in types.items() if k.scope == 0 and rng.random() < 0.5}
    plan = lambda: DigestPlan(known=dict(given_), passwords=passwords)  # noqa: E731
    with tempfile.TemporaryDirectory() as d:
        wb = write_bookie(spec, d)
        for log in wb.entry_log_files:
            b = bytearray(Path(log).read_bytes())
            if len(b) <= HEADER_SIZE:
                continue
            for _ in range(rng.randint(1, 3)):
                p = rng.randrange(HEADER_SIZE, len(b))
                kind = rng.randrange(5)
                if kind == 0:
                    b[p] ^= 1 << rng.randrange(8)
                elif kind == 1:
                    del b[p:]
                elif kind == 2:
                    q = min(len(b), p + rng.randint(1, 600))
                    b[p:q] = bytes(q - p)
                elif kind == 3:
                    b[p:p + 4] = rng.randbytes(4)
                else:
                    b[p:p] = rng.randbytes(rng.randint(1, 40))
                if len(b) <= HEADER_SIZE:
                    break
            data = bytes(b)
            ref = scan_entry_log_reference(log, data)
            results = []
            for window in (4096, 7000, 1 << 20):
                pl = plan()
                got = scan_entry_log(log, data=data, window=window, digests=pl)
                assert_same_scan(got, ref)
                results.append((got.digests[["type", "source", "status"]].tolist(), dict(pl.decided)))
            # every window size reaches the same decisions and statuses (late decisions rechecked)
            assert results[0] == results[1] == results[2]
            arr = np.frombuffer(data, np.uint8)
            decided = {k: v for k, v in pl.decided.items() if k not in given_}
            for key, (code, src) in decided.items():
                assert src == SOURCE_SNIFFED and code in (0, int(types[key]))
            # a sniffed CRC32C / CRC32 (or HMAC with its password) ledger with an intact entry among
            # its first max_samples is decided as its real type
            intact = np.ones(len(ref.entries), bool)
            intact[verify_entries(arr, ref.entries, types, passwords)] = False
            v1 = ref.entries["format"] == 1
            for key in decided:
                t = types[key]
                if t in (DigestType.CRC32C, DigestType.CRC32) or (t == DigestType.HMAC and key in passwords):
                    mine = np.flatnonzero(v1 & (ref.entries["ledger"] == key[1]))[:pl.max_samples]
                    if intact[mine].any():
                        assert decided[key][0] == int(t), (key, t)
            # digest statuses against the pure-Python verifier (verify_entries below), with the types
            # the plan ended with for the sniffed ledgers
            effective = {k: (t if k.scope or k in given_ else
                             (DigestType(pl.decided[k][0]) if pl.decided.get(k, (0, 0))[0] else None))
                         for k, t in types.items()}
            bad = verify_entries(arr, ref.entries, effective, passwords)
            assert np.flatnonzero(got.digests["status"] == DIGEST_BAD).tolist() == bad.tolist()


def verify_entries(arr: np.ndarray, entries: np.ndarray, types: dict[LedgerId, DigestType | None],
                   passwords: dict[LedgerId, bytes]) -> np.ndarray:
    """Indices of ``entries`` (ENTRY_DTYPE, in the file's bytes ``arr``) whose stored digest does not match,
    one entry at a time through formats.digests: V1 entries with their ledger's type from ``types``
    (None: not verified), V2 entries with their own; HMAC only where ``passwords`` has the ledger."""
    bad = []
    mv = memoryview(arr)
    for i, r in enumerate(entries):
        lid = LedgerId(int(r["scope"]), int(r["ledger"]))
        s, n = int(r["offset"]) + SIZE_PREFIX_SIZE, int(r["size"])
        if r["format"] == 2:
            dt, hs = DigestType(arr[s + V2_FLAGS_AT] & V2_DIGEST_MASK), ENTRY_V2_HEADER_SIZE
        else:
            dt, hs = types.get(lid), ENTRY_V1_HEADER_SIZE
        pw = passwords.get(lid)
        if dt is None or dt == DigestType.DUMMY or (dt == DigestType.HMAC and pw is None):
            continue
        d = DIGEST_LENGTH[dt]
        if n < hs + d or compute_digest(dt, mv[s:s + hs], mv[s + hs + d:s + n], pw) != mv[s + hs:s + hs + d]:
            bad.append(i)
    return np.array(bad, dtype=np.int64)


# --- injected damage against the writer's known entries --------------------------------------
def _damage_bookie(d: str):
    rng = random.Random(7)
    ledgers = [LedgerSpec(10 + i, [rng.randbytes(rng.choice([40, 300, 900, 2500])) for _ in range(8)],
                          digest_type=[DigestType.CRC32C, DigestType.CRC32, DigestType.HMAC, DigestType.DUMMY][i % 4],
                          password=b"secret", scope_id=0 if i % 3 else 77) for i in range(6)]
    spec = BookieSpec(ledgers, entry_log_size_limit=1 << 20, write_journal=False)
    wb = write_bookie(spec, d)
    log = wb.entry_log_files[0]
    assert os.path.getsize(log) > 20_000
    placed = {k: unpack_location(loc) for k, loc in wb.locations.items()}
    recs = sorted(pos - SIZE_PREFIX_SIZE for log_id, pos in placed.values() if log_id == 0)
    by_off = {}
    for (lid, eid), (log_id, pos) in placed.items():
        if log_id == 0:
            by_off[pos - SIZE_PREFIX_SIZE] = (lid, eid, len(wb.entries[(lid, eid)]))
    plan = DigestPlan(known={l.lid: l.digest_type for l in ledgers}, passwords={l.lid: l.password for l in ledgers})
    return wb, log, recs, by_off, plan


def _expect_found(by_off: dict, damaged: range) -> list[tuple]:
    """Entries whose size prefix and 32-byte header are outside the damaged bytes."""
    out = []
    for off, (lid, eid, size) in sorted(by_off.items()):
        head = range(off, off + 4 + 45)
        if head.stop <= damaged.start or head.start >= damaged.stop:
            out.append((off, size, lid.scope, lid.ledger, eid))
    return out


def _found(s) -> list[tuple]:
    return [(int(e["offset"]), int(e["size"]), int(e["scope"]), int(e["ledger"]), int(e["entry"])) for e in s.entries]


def _check_damage(log, data, by_off, plan, damaged: range, first_bad: int, reason: Damage, *, truncated_at=None):
    s = scan_entry_log(log, data=data, window=4096, digests=plan)
    assert_same_scan(s, scan_entry_log_reference(log, data))
    assert len(s.problems) >= 1
    assert (int(s.problems[0]["offset"]), int(s.problems[0]["reason"])) == (first_bad, int(reason))
    want = _expect_found(by_off, damaged)
    if truncated_at is not None:
        want = [w for w in want if w[0] + 4 + w[1] <= truncated_at]
    assert _found(s) == want  # none lost, none invented
    for (off, size, *_rest), dg in zip(_found(s), s.digests):
        hit = off < damaged.stop and off + 4 + size > damaged.start
        want_ok = not hit or int(dg["type"]) == DigestType.DUMMY  # DUMMY has nothing to check
        assert (int(dg["status"]) == DIGEST_OK) == want_ok, f"entry at {off}: damaged {hit}, {dg}"
    return s


def test_flipped_header_byte_is_reported_at_its_entry_and_every_later_entry_is_recovered():
    with tempfile.TemporaryDirectory() as d:
        wb, log, recs, by_off, plan = _damage_bookie(d)
        data = bytearray(Path(log).read_bytes())
        off = recs[7]
        data[off + 4 + 8] ^= 0x80  # the entry id's sign bit: a negative entry id
        s = _check_damage(log, bytes(data), by_off, plan, range(off + 12, off + 13), off, Damage.BAD_HEADER)
        assert int(s.problems[0]["resumed_at"]) == recs[8]


def test_flipped_payload_byte_keeps_framing_and_fails_only_that_digest():
    with tempfile.TemporaryDirectory() as d:
        wb, log, recs, by_off, plan = _damage_bookie(d)
        data = bytearray(Path(log).read_bytes())
        for k in range(6, 12):  # one entry of each ledger, so of each digest type
            off = recs[k]
            data[off + 4 + by_off[off][2] - 1] ^= 0x01  # the payload's last byte
        s = scan_entry_log(log, data=bytes(data), window=4096, digests=plan)
        assert_same_scan(s, scan_entry_log_reference(log, bytes(data)))
        assert len(s.problems) == 0 and len(s.entries) == len(recs)
        types = {int(e["offset"]): DigestType(int(g["type"])) for e, g in zip(s.entries, s.digests)}
        for e, g in zip(s.entries, s.digests):
            off = int(e["offset"])
            if off in recs[6:12] and types[off] != DigestType.DUMMY:
                assert int(g["status"]) == DIGEST_BAD
            else:
                assert int(g["status"]) == DIGEST_OK


def test_flipped_size_byte_is_reported_at_its_entry_and_every_later_entry_is_recovered():
    with tempfile.TemporaryDirectory() as d:
        wb, log, recs, by_off, plan = _damage_bookie(d)
        data = bytearray(Path(log).read_bytes())
        off = recs[12]
        data[off] ^= 0x10  # the size becomes far larger than the data
        _check_damage(log, bytes(data), by_off, plan, range(off, off + 1), off, Damage.BAD_SIZE)


def test_truncated_log_reports_the_cut_entry_and_keeps_all_before_it():
    with tempfile.TemporaryDirectory() as d:
        wb, log, recs, by_off, plan = _damage_bookie(d)
        data = Path(log).read_bytes()
        off = recs[20]
        cut = off + 4 + by_off[off][2] // 2
        s = _check_damage(log, data[:cut], by_off, plan, range(cut, len(data)), off, Damage.BAD_SIZE,
                          truncated_at=cut)
        assert int(s.problems[0]["resumed_at"]) == cut and len(s.problems) == 1
        s2 = scan_entry_log(log, data=data[:off + 2], window=4096)
        assert s2.problems.tolist() == [(off, int(Damage.TRUNCATED), off + 2)]


def test_zeroed_region_is_reported_at_its_first_entry_and_the_rest_is_recovered():
    with tempfile.TemporaryDirectory() as d:
        wb, log, recs, by_off, plan = _damage_bookie(d)
        data = bytearray(Path(log).read_bytes())
        a, b = recs[9], recs[14] + 20  # from entry 9's size prefix into entry 14's header
        data[a:b] = bytes(b - a)
        s = _check_damage(log, bytes(data), by_off, plan, range(a, b), a, Damage.ZERO_SIZE)
        assert int(s.problems[0]["resumed_at"]) == recs[15]
        # starting inside a payload: that entry keeps its framing (bad digest), the next one breaks
        data = bytearray(Path(log).read_bytes())
        a, b = recs[9] + 60, recs[11] + 10
        data[a:b] = bytes(b - a)
        _check_damage(log, bytes(data), by_off, plan, range(a, b), recs[10], Damage.ZERO_SIZE)


def test_zeros_to_the_end_of_data_are_an_unwritten_tail_unless_a_ledgers_map_follows():
    with tempfile.TemporaryDirectory() as d:
        wb, log, recs, by_off, plan = _damage_bookie(d)
        data = Path(log).read_bytes()
        last = recs[-1] + 4 + by_off[recs[-1]][2]
        tail = data[:last] + bytes(5000)  # a log never rolled, with zeros after its data
        s = scan_entry_log(log, data=tail, window=4096)
        assert_same_scan(s, scan_entry_log_reference(log, tail))
        assert len(s.problems) == 0 and len(s.entries) == len(recs)
        spec = BookieSpec([LedgerSpec(1, [b"x" * 3000] * 5), LedgerSpec(2, [b"y" * 3000] * 5)],
                          entry_log_size_limit=12_000, write_journal=False)
        wb2 = write_bookie(spec, os.path.join(d, "rolled"))
        rolled = Path(wb2.entry_log_files[0]).read_bytes()
        ref0 = scan_entry_log_reference(wb2.entry_log_files[0])
        assert ref0.ledgers_map is not None
        cut = int(ref0.entries[-1]["offset"])
        zeroed = rolled[:cut] + bytes(ref0.data_end - cut) + rolled[ref0.data_end:]
        s = scan_entry_log(wb2.entry_log_files[0], data=zeroed, window=4096)
        assert_same_scan(s, scan_entry_log_reference(wb2.entry_log_files[0], zeroed))
        assert s.problems.tolist() == [(cut, int(Damage.ZERO_SIZE), ref0.data_end)]


def test_records_larger_than_the_window_and_files_scanned_in_many_windows():
    with tempfile.TemporaryDirectory() as d:
        spec = BookieSpec([LedgerSpec(5, [os.urandom(70_000), b"a", os.urandom(9000)] * 4,
                                      digest_type=DigestType.CRC32)],
                          entry_log_size_limit=1 << 30, write_journal=False)
        wb = write_bookie(spec, d)
        log = wb.entry_log_files[0]
        ref = scan_entry_log_reference(log)
        for window in (4096, 65536, 1 << 20):
            s = scan_entry_log(log, window=window, digests=DigestPlan())
            assert_same_scan(s, ref)
            assert (s.digests["status"] == DIGEST_OK).all() and len(s.entries) == 12


def test_verify_entry_digests_on_in_memory_bytes_matches_the_windowed_scan():
    corpus = GOLDEN / "interleaved-v4-smallpage"
    doc = _manifest(corpus)
    for _, log in _logs(corpus, doc):
        data = log.read_bytes()
        s = scan_entry_log(log, window=4096, digests=_golden_plan(doc), payload_hash="sha256")
        d, h = verify_entry_digests(data, s.entries, _golden_plan(doc), payload_hash="sha256")
        assert d.tolist() == s.digests.tolist() and h == s.payload_hashes


def test_empty_preallocated_log_scans_to_nothing():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "5.log")
        open(p, "wb").close()
        s = scan_entry_log(p, digests=DigestPlan())
        assert_same_scan(s, scan_entry_log_reference(p))
        assert len(s.entries) == 0 and s.log_id == 5 and len(s.digests) == 0


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_rolled_log_with_a_zeroed_header_walks_over_its_ledgers_map_without_damage(corpus: Path):
    doc = _manifest(corpus)
    rolled = [(ld, p) for ld, p in _logs(corpus, doc)
              if p.stat().st_size and int.from_bytes(p.read_bytes()[8:16], "big") > 0]
    assert rolled, "every corpus has a rolled log with a ledgers map"
    for _ld, p in rolled:
        data = bytes(HEADER_SIZE) + p.read_bytes()[HEADER_SIZE:]
        got, want = scan_entry_log(str(p), data=data), scan_entry_log_reference(str(p), data)
        assert_same_scan(got, want)
        assert want.header is None and want.problems.tolist() == []
        assert len(want.entries) == len(scan_entry_log_reference(str(p)).entries)


# --- DirectEntryLogger logs: the dummy record at 1024, 0xF0 flush padding, ledger -1 records ---------
ALIGN = 4096


def _direct_log(flushes: list[list[bytes]], *, finalize: bool = False, tail: int = 2 * ALIGN):
    """A log as DirectEntryLogger writes it: a 4096-byte header block (BKLO header, then at 1024 the
    dummy record ``int 3068, long -1`` and zeros), each flush's records padded with 0xF0 to a 4096
    boundary, optionally the ledgers map (itself a padded flush) with the header rewritten, then the
    fallocated zero tail. Returns (bytes, [(offset, size, ledger, entry)], map offset or None)."""
    body = bytearray((3068).to_bytes(4, "big") + b"\xff" * 8)
    out = bytearray(fe_build_header()) + body + bytes(ALIGN - 1024 - len(body))
    recs, sizes = [], {}
    for group in flushes:
        for e in group:
            recs.append((len(out), len(e), int.from_bytes(e[0:8], "big"), int.from_bytes(e[8:16], "big")))
            sizes[(0, recs[-1][2])] = sizes.get((0, recs[-1][2]), 0) + len(e) + 4
            out += len(e).to_bytes(4, "big") + e
        out += b"\xf0" * (-len(out) % ALIGN)
    map_at = None
    if finalize:
        map_at = len(out)
        out += fe_build_ledgers_map(sizes)
        out += b"\xf0" * (-len(out) % ALIGN)
        out[:1024] = fe_build_header(ledgers_map_offset=map_at, ledgers_count=len(sizes))
    return bytes(out + bytes(tail)), recs, map_at


def _direct_entries(rng: random.Random, spec: list[tuple[int, int]], dt=DigestType.CRC32C):
    """Entries (stored bytes) of ``spec`` = [(ledger, payload size)], entry ids and lengths per ledger."""
    from bkdisk.formats.entry import package_entry
    nxt, length, out = {}, {}, []
    for lid, n in spec:
        eid = nxt.get(lid, 0)
        nxt[lid] = eid + 1
        length[lid] = length.get(lid, 0) + n
        out.append(package_entry(ledger_id=lid, entry_id=eid, last_add_confirmed=eid - 1, length=length[lid],
                                 payload=rng.randbytes(n), digest_type=dt, password=b"pw").to_bytes())
    return out


def fe_build_header(**kw) -> bytes:
    from bkdisk.formats.entrylog import build_header
    return build_header(**kw)


def fe_build_ledgers_map(sizes) -> bytes:
    from bkdisk.formats.entrylog import build_ledgers_map
    return build_ledgers_map(sizes)


def _padded_flushes(rng: random.Random):
    # a CRC32C V1 record is 4 + 32 + 4 + payload bytes: payloads 4054, 4055, 4053, 4056 leave
    # 2, 1, 3 and 0 bytes of padding after a one-record flush
    groups = [[(7, 4054)], [(7, 4055)], [(8, 4053)], [(8, 4056)], [(7, 100), (8, 200), (7, 1)],
              [(9, 10_000)], [(7, 5), (9, 3000), (8, 50), (9, 0)], [(8, 4000), (7, 4000)]]
    ents = _direct_entries(rng, [x for g in groups for x in g])
    it = iter(ents)
    return [[next(it) for _ in g] for g in groups]


@pytest.mark.parametrize("finalize", [False, True], ids=["current", "finalized"])
def test_direct_io_log_skips_its_dummy_record_and_flush_padding_without_damage(finalize: bool):
    flushes = _padded_flushes(random.Random(5))
    data, recs, map_at = _direct_log(flushes, finalize=finalize)
    assert data[1024:1028] == bytes.fromhex("00000bfc") and data[1028:1036] == b"\xff" * 8
    assert recs[0][0] == ALIGN
    # the first four flushes hold one record each, followed by 2, 1, 3 and 0 bytes of padding
    assert [-(o + 4 + s) % ALIGN for o, s, *_ in recs[:4]] == [2, 1, 3, 0]
    assert data[recs[1][0] - 2:recs[1][0]] == b"\xf0\xf0" and recs[4][0] == recs[3][0] + 4 + recs[3][1]
    ref = scan_entry_log_reference("/x/1.log", data)
    plan = lambda: DigestPlan(known={(0, l): DigestType.CRC32C for l in (7, 8, 9)})  # noqa: E731
    for window in (4096, 5000, 8192, 1 << 20):
        got = scan_entry_log("/x/1.log", data=data, window=window, digests=plan())
        assert_same_scan(got, ref)
        assert (got.digests["status"] == DIGEST_OK).all()
    assert ref.problems.tolist() == [] and ref.header_error is None and ref.map_error is None
    assert [(int(e["offset"]), int(e["size"]), int(e["ledger"]), int(e["entry"])) for e in ref.entries] == recs
    if finalize:
        assert ref.data_end == map_at and ref.ledgers_map == ref.computed_ledgers_map()
        assert len(ref.ledgers_map) == 3
    else:
        assert ref.ledgers_map is None and ref.data_end == len(data)


def test_direct_io_log_padding_is_skipped_only_up_to_a_boundary_within_the_data():
    flushes = _padded_flushes(random.Random(6))
    data, recs, _ = _direct_log(flushes, tail=0)
    ref = scan_entry_log_reference("/x/1.log", data)
    assert ref.problems.tolist() == [] and len(ref.entries) == len(recs)
    # padding cut short by the end of the file is not padding: the walk reports where it stops
    cut = data[:len(data) - 10]
    ref = scan_entry_log_reference("/x/1.log", cut)
    for window in (4096, 1 << 20):
        assert_same_scan(scan_entry_log("/x/1.log", data=cut, window=window), ref)
    last = recs[-1][0] + 4 + recs[-1][1]
    assert len(ref.entries) == len(recs) and ref.problems.tolist() == [(last, int(Damage.ZERO_SIZE), len(cut))]
    # 0xF0 bytes that stop short of the boundary are damage too
    b = bytearray(data)
    b[last + 5] = 0x00
    ref = scan_entry_log_reference("/x/1.log", bytes(b))
    for window in (4096, 1 << 20):
        assert_same_scan(scan_entry_log("/x/1.log", data=bytes(b), window=window), ref)
    assert ref.problems.tolist() == [(last, int(Damage.ZERO_SIZE), len(b))]


def test_any_record_of_ledger_minus_one_is_skipped_as_scan_entry_log_skips_it():
    with tempfile.TemporaryDirectory() as d:
        wb, log, recs, by_off, plan = _damage_bookie(d)
        data = Path(log).read_bytes()
        # ledger -1 records that are not ledgers-map batches: the bare minimum (size 16), garbage after
        # the id, and a size the 32-byte entry header would refuse
        inserts = {recs[3]: (16).to_bytes(4, "big") + b"\xff" * 8 + bytes(8),
                   recs[10]: (300).to_bytes(4, "big") + b"\xff" * 8 + random.Random(1).randbytes(292),
                   recs[11]: (20).to_bytes(4, "big") + b"\xff" * 8 + b"\x01" * 12}
        out, moved = bytearray(), {}
        prev = 0
        for off in sorted(inserts):
            out += data[prev:off] + inserts[off]
            prev = off
        out += data[prev:]
        for off in recs:
            moved[off] = off + sum(len(v) for k, v in inserts.items() if k <= off)
        out = bytes(out)
        ref = scan_entry_log_reference(log, out)
        for window in (4096, 1 << 20):
            got = scan_entry_log(log, data=out, window=window, digests=plan)
            assert_same_scan(got, ref)
            assert (got.digests["status"] == DIGEST_OK).all()
        assert ref.problems.tolist() == []
        assert ref.entries["offset"].tolist() == [moved[o] for o in recs]


def test_damage_in_a_direct_io_log_resyncs_onto_the_entry_that_precedes_padding():
    rng = random.Random(9)
    groups = [[(1, 700), (2, 900)], [(1, 300), (2, 1200), (1, 50)], [(2, 2000), (1, 10)], [(1, 600)]]
    ents = _direct_entries(rng, [x for g in groups for x in g])
    it = iter(ents)
    data, recs, _ = _direct_log([[next(it) for _ in g] for g in groups])
    for k in (0, 2, 5, 3):   # break the first record of a flush (or a middle one); its successors survive
        b = bytearray(data)
        off = recs[k][0]
        b[off:off + 4] = (0x7FFF0000).to_bytes(4, "big")   # a size past the data
        ref = scan_entry_log_reference("/x/3.log", bytes(b))
        for window in (4096, 6000, 1 << 20):
            assert_same_scan(scan_entry_log("/x/3.log", data=bytes(b), window=window), ref)
        assert ref.problems.tolist() == [(off, int(Damage.BAD_SIZE), recs[k + 1][0])]
        want = [r for i, r in enumerate(recs) if i != k]
        assert [(int(e["offset"]), int(e["size"]), int(e["ledger"]), int(e["entry"])) for e in ref.entries] == want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2 ** 32 - 1), finalize=st.booleans())
def test_scan_equals_reference_on_direct_io_logs_under_random_damage(seed: int, finalize: bool):
    rng = random.Random(seed)
    spec = [(rng.choice([3, 4, 5]), rng.choice([0, 1, 30, 500, 2000, 4055, 6000])) for _ in range(rng.randint(1, 14))]
    ents = _direct_entries(rng, spec, dt=rng.choice([DigestType.CRC32C, DigestType.CRC32]))
    flushes, i = [], 0
    while i < len(ents):
        k = rng.randint(1, 4)
        flushes.append(ents[i:i + k])
        i += k
    data, recs, _ = _direct_log(flushes, finalize=finalize, tail=rng.choice([0, 100, 8192]))
    clean = scan_entry_log_reference("/x/2.log", data)
    assert clean.problems.tolist() == [] and len(clean.entries) == len(recs)
    b = bytearray(data)
    for _ in range(rng.randint(0, 3)):
        p = rng.randrange(1024, len(b))
        kind = rng.randrange(6)
        if kind == 0:
            b[p] ^= 1 << rng.randrange(8)
        elif kind == 1:
            del b[p:]
        elif kind == 2:
            q = min(len(b), p + rng.randint(1, 600))
            b[p:q] = bytes(q - p)
        elif kind == 3:
            b[p:p + 4] = rng.randbytes(4)
        elif kind == 4:
            q = min(len(b), p + rng.randint(1, 5000))
            b[p:q] = b"\xf0" * (q - p)
        else:
            b[p:p] = rng.randbytes(rng.randint(1, 40))
        if len(b) <= 1024:
            break
    out = bytes(b)
    ref = scan_entry_log_reference("/x/2.log", out)
    for window in (4096, 7000, 1 << 20):
        assert_same_scan(scan_entry_log("/x/2.log", data=out, window=window, digests=DigestPlan()), ref)


# --- digest sniffing: a ledger stays undecided until one of its entries verifies ---------------------
def _flip_payloads(data: bytearray, offsets: list[int], sizes: dict[int, int]) -> None:
    for off in offsets:
        data[off + 4 + sizes[off] - 1] ^= 0x01   # the payload's last byte


def _one_ledger_log(d: str, dt: DigestType, n: int, payload: int, limit: int = 1 << 20):
    spec = BookieSpec([LedgerSpec(42, [random.Random(i).randbytes(payload) for i in range(n)], digest_type=dt)],
                      entry_log_size_limit=limit, write_journal=False)
    wb = write_bookie(spec, d)
    recs = {}
    for (lid, eid), loc in wb.locations.items():
        log_id, pos = unpack_location(loc)
        recs[eid] = (wb.entry_log_files[log_id], pos - SIZE_PREFIX_SIZE, len(wb.entries[(lid, eid)]))
    return wb, recs


@pytest.mark.parametrize("dt", [DigestType.CRC32C, DigestType.CRC32])
def test_ledger_whose_first_entries_are_corrupt_is_sniffed_from_a_later_one_and_they_are_bad(dt: DigestType):
    with tempfile.TemporaryDirectory() as d:
        wb, recs = _one_ledger_log(d, dt, 12, 1500)
        log = wb.entry_log_files[0]
        data = bytearray(Path(log).read_bytes())
        _flip_payloads(data, [recs[e][1] for e in range(4)], {r[1]: r[2] for r in recs.values()})
        data = bytes(data)
        # window 4096 holds about two entries: the first windows hold only corrupt ones
        for window in (4096, 1 << 20):
            plan = DigestPlan()
            s = scan_entry_log(log, data=data, window=window, digests=plan)
            assert s.entries["entry"].tolist() == list(range(12))
            assert s.digests["status"].tolist() == [DIGEST_BAD] * 4 + [DIGEST_OK] * 8
            assert set(s.digests["type"].tolist()) == {int(dt)}
            assert set(s.digests["source"].tolist()) == {SOURCE_SNIFFED}
            assert (s.digests["payload_len"] == 1500).all()
            assert plan.ledger_digest((0, 42)) == (dt, "sniffed")


def test_entries_left_unknown_are_rechecked_once_another_file_decides_their_ledger():
    with tempfile.TemporaryDirectory() as d:
        wb, recs = _one_ledger_log(d, DigestType.CRC32C, 10, 1000, limit=5000)
        logs = wb.entry_log_files
        first = [e for e, r in recs.items() if r[0] == logs[0]]
        assert len(logs) >= 2 and 2 <= len(first) < 10
        data0 = bytearray(Path(logs[0]).read_bytes())
        _flip_payloads(data0, [recs[e][1] for e in first], {recs[e][1]: recs[e][2] for e in first})
        data0 = bytes(data0)
        plan = DigestPlan()
        s0 = scan_entry_log(logs[0], data=data0, digests=plan, payload_hash="sha256")
        # every entry of this file is corrupt: nothing decides the ledger yet
        assert s0.digests["status"].tolist() == [DIGEST_UNKNOWN] * len(first)
        assert set(s0.digests["type"].tolist()) == {0} and plan.ledger_digest((0, 42)) == (None, None)
        s1 = scan_entry_log(logs[1], digests=plan)
        assert (s1.digests["status"] == DIGEST_OK).all()
        assert plan.ledger_digest((0, 42)) == (DigestType.CRC32C, "sniffed")
        # a caller re-verifying those entries with the plan gets their real status ...
        rows, _ = verify_entry_digests(data0, s0.entries, plan)
        assert rows["status"].tolist() == [DIGEST_BAD] * len(first)
        assert set(rows["type"].tolist()) == {int(DigestType.CRC32C)}
        # ... and recheck_digests does it in place, payload lengths and hashes included
        assert recheck_digests(s0, plan, data0) == len(first)
        assert s0.digests.tolist() == rows.tolist()
        assert (s0.digests["payload_len"] == 1000).all() and all(h is not None for h in s0.payload_hashes)
        assert recheck_digests(s0, plan, data0) == 0
        # from the file itself (mapped) too
        Path(logs[0]).write_bytes(data0)
        s0f = scan_entry_log(logs[0], digests=DigestPlan())
        assert recheck_digests(s0f, DigestPlan()) == 0          # still undecided: nothing to do
        assert recheck_digests(s0f, plan) == len(first) and s0f.digests.tolist() == rows.tolist()
        # and of a scan kept in a sink's columns (spilled), a part at a time
        with tempfile.TemporaryDirectory() as tmp, SpillFolder(MemoryLimit(1, tmp)) as folder:
            s0c = scan_entry_log(logs[0], digests=DigestPlan(), sink=ScanSink(Room(0), folder))
            assert isinstance(s0c, ChunkedLogScan) and s0c.spilled
            assert recheck(DigestPlan(), s0c) == 0
            assert recheck(plan, s0c) == len(first) and s0c.digests.tolist() == rows.tolist()
            s0c.close()


@pytest.mark.parametrize("corrupt, limit, decided", [(63, 64, True), (64, 64, False), (7, 8, True), (8, 8, False)])
def test_sniffing_gives_up_on_a_ledger_only_after_max_samples_entries_verify_as_nothing(corrupt, limit, decided):
    with tempfile.TemporaryDirectory() as d:
        wb, recs = _one_ledger_log(d, DigestType.CRC32C, 70, 3)
        log = wb.entry_log_files[0]
        data = bytearray(Path(log).read_bytes())
        _flip_payloads(data, [recs[e][1] for e in range(corrupt)], {r[1]: r[2] for r in recs.values()})
        data = bytes(data)
        for window in (4096, 1 << 20):
            plan = DigestPlan(max_samples=limit)
            s = scan_entry_log(log, data=data, window=window, digests=plan)
            st_ = s.digests["status"].tolist()
            if decided:
                assert st_ == [DIGEST_BAD] * corrupt + [DIGEST_OK] * (70 - corrupt)
                assert plan.ledger_digest((0, 42)) == (DigestType.CRC32C, "sniffed")
            else:
                assert st_ == [DIGEST_UNKNOWN] * 70
                assert plan.ledger_digest((0, 42)) == (None, "sniffed") and plan.tried[(0, 42)] == limit


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2**63, 2**64 - 1]),
                          st.one_of(st.integers(0, 4), st.integers(0, 2**64 - 1)),
                          st.integers(0, 2**31 - 1)), max_size=40))
def test_computed_ledgers_map_sums_size_and_prefix_per_ledger(rows):
    from bkdisk.entrylogs.arrays import ENTRY_DTYPE, PROBLEM_DTYPE, EntryLogArrays
    e = np.zeros(len(rows), ENTRY_DTYPE)
    if rows:
        e["scope"], e["ledger"], e["size"] = zip(*rows)
    scan = EntryLogArrays("x.log", 0, 0, None, None, None, None, 0, e, np.zeros(0, PROBLEM_DTYPE))
    want: dict[tuple[int, int], int] = {}
    for s, l, n in rows:
        want[(s, l)] = want.get((s, l), 0) + n + SIZE_PREFIX_SIZE
    got = scan.computed_ledgers_map()
    assert got == want and list(got) == sorted(want)
    assert all(type(k[0]) is int and type(k[1]) is int and type(v) is int for k, v in got.items())
