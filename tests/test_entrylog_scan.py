"""The jitted entry-log scanner against its reference twin, the golden corpora and the writer's bytes."""
from __future__ import annotations

import json
import os
import random
import tempfile
import zlib
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookie.model import BookieSpec, LedgerSpec
from bookie.writer import write_bookie
from diskio import kernels as K
from entrylogs.arrays import scan_entry_log_reference
from entrylogs.reader import Damage
from entrylogs.verify import verify_entries
from entrylogs.scan import (DIGEST_BAD, DIGEST_OK, DIGEST_UNKNOWN, SOURCE_ENTRY, SOURCE_GIVEN, SOURCE_SNIFFED,
                            DigestPlan, scan_entry_log, verify_entry_digests)
from formats.digests import DigestType
from formats.entrylog import HEADER_SIZE

GOLDEN = Path(__file__).resolve().parents[2] / "shared" / "golden"
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


# --- CRC kernels -----------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=0, max_size=3000), skip=st.integers(0, 7))
def test_every_crc_variant_equals_zlib_and_crc32c(data: bytes, skip: int):
    buf = K.as_bytes_array(bytes(skip) + data)
    for variant in K.supported_crc_variants():
        assert K.crc32_of(buf, skip, len(data), K.POLY_CRC32, variant) == zlib.crc32(data)
        assert K.crc32_of(buf, skip, len(data), K.POLY_CRC32C, variant) == crc32c.crc32c(data)


def test_crc_variant_defaults_to_the_fastest_the_cpu_supports():
    assert K.CRC_VARIANT in K.supported_crc_variants()
    if os.environ.get("BKDISK_CRC") is None:
        assert K.CRC_VARIANT == K.best_crc_variant()


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
    plan = lambda: DigestPlan(known={k: t for k, t in types.items() if k.scope == 0}, passwords=passwords)  # noqa: E731
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
            for window in (4096, 7000, 1 << 20):
                got = scan_entry_log(log, data=data, window=window, digests=plan())
                assert_same_scan(got, ref)
            # digest statuses against the pure-Python verifier (entrylogs/verify.py)
            bad = verify_entries(np.frombuffer(data, np.uint8), ref.entries, types, passwords)
            assert np.flatnonzero(got.digests["status"] == DIGEST_BAD).tolist() == bad.tolist()


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
    recs = sorted((loc & 0xFFFFFFFF) - 4 for loc in wb.locations.values() if loc >> 32 == 0)
    by_off = {}
    for (lid, eid), loc in wb.locations.items():
        if loc >> 32 == 0:
            by_off[(loc & 0xFFFFFFFF) - 4] = (lid, eid, len(wb.entries[(lid, eid)]))
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
