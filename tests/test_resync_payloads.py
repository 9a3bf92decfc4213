"""Resync after a damaged size field, over payloads that hold entry-like headers: payloads of small
big-endian integers (counters, ids, offsets) and of mostly zeros. A chance header there can have a whole
successor and a record that runs over the next real entry; the walk never takes one up whose records
pass over an entry that proves itself by its CRC, so it loses no real entry."""
from __future__ import annotations

import random
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest

from bkdisk.entrylogs.reader import Damage, read_entry_log
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.writer import EntryLogWriter
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import build_entry, package_entry
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.index import unpack_location


def _payload(rng: random.Random, kind: str, n: int) -> bytes:
    if kind == "integers":   # records of four small big-endian longs
        out = bytearray()
        while len(out) < n:
            out += struct.pack(">qqqq", rng.randrange(300), rng.randrange(5000), rng.randrange(5000) - 1,
                               rng.randrange(2000))
        return bytes(out[:n])
    sparse = bytearray(n)   # mostly zeros
    for _ in range(n // 16):
        sparse[rng.randrange(n)] = rng.randrange(256)
    return bytes(sparse)


def _log(folder: str, seed: int, kind: str, digest_of) -> tuple[str, list[int]]:
    """An entry log of 600 entries over 300 small ledger ids, interleaved; the size prefix offsets."""
    rng = random.Random(seed)
    path = str(Path(folder) / "1.log")
    w = EntryLogWriter(path, 1)
    next_entry: dict[int, int] = {}
    offsets = []
    for _ in range(600):
        lid = rng.randrange(1, 300)
        e = next_entry[lid] = next_entry.get(lid, -1) + 1
        pl = _payload(rng, kind, rng.randrange(100, 1000))
        entry = build_entry(package_entry(ledger_id=lid, entry_id=e, last_add_confirmed=e - 1, length=len(pl),
                                          payload=pl, digest_type=digest_of(lid), password=b"pw"))
        offsets.append(unpack_location(w.append(entry, 0, lid))[1] - SIZE_PREFIX_SIZE)
    w.close(roll=True)
    return path, offsets


def _crc(lid: int) -> DigestType:
    return DigestType.CRC32 if lid % 11 == 0 else DigestType.CRC32C


def _damaged(data: bytes, at: int, how: int, rng: random.Random) -> bytes:
    b = bytearray(data)
    b[at:at + SIZE_PREFIX_SIZE] = (rng.randbytes(4), struct.pack(">i", 0x7FFF0000), struct.pack(">i", 7))[how]
    return bytes(b)


@pytest.mark.parametrize("kind", ["integers", "sparse"])
def test_a_damaged_size_field_loses_no_later_entry_and_invents_none_past_the_next_one(kind):
    """Every entry but the damaged one is found, by the reference reader and the jitted walk alike; a
    record reported that was never written (a chance header inside the damaged entry, taken up because
    its records pass over no entry that proves itself) lies before the next real entry."""
    rng = random.Random(7)
    resumed_on_next = damages = 0
    with tempfile.TemporaryDirectory() as d:
        path, offsets = _log(d, 11, kind, _crc)
        data = Path(path).read_bytes()
        for i in rng.sample(range(len(offsets) - 1), 25):
            bad = _damaged(data, offsets[i], damages % 3, rng)
            damages += 1
            ref = read_entry_log(path, bad)
            got = scan_entry_log(path, data=bad, window=4096)
            assert [r.offset for r in ref.records] == got.entries["offset"].tolist()
            assert [(p.offset, int(p.reason), p.resumed_at) for p in ref.problems] == got.problems.tolist()
            found = [r.offset for r in ref.records]
            true_next = offsets[i + 1]
            assert set(offsets) - {offsets[i]} <= set(found), f"entries lost after damage at {offsets[i]}"
            assert set(found) - set(offsets) <= set(range(offsets[i], true_next)), "a phantom past the next entry"
            assert ref.problems[0].offset == offsets[i]
            resumed_on_next += ref.problems[0].resumed_at == true_next
    assert resumed_on_next >= damages * 0.8


def test_entries_whose_digest_cannot_be_checked_stay_candidates_up_to_the_next_damage():
    """Three CRC32C entries, twenty of an HMAC ledger, ten CRC32C ones; the size fields of the third entry
    and of an HMAC one damaged. No HMAC entry proves itself and their records stop at the second damage,
    short of the first entry that proves itself: they pass over none, so the walk takes up at the first
    of them, and reports the second damage where it is."""
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "1.log")
        w = EntryLogWriter(path, 1)
        offsets = []
        for k, (lid, dt) in enumerate([(1, DigestType.CRC32C)] * 3 + [(5, DigestType.HMAC)] * 20
                                      + [(1, DigestType.CRC32C)] * 10):
            e = k if lid == 1 else k - 3
            b = build_entry(package_entry(ledger_id=lid, entry_id=e, last_add_confirmed=e - 1, length=100,
                                          payload=bytes(range(100)), digest_type=dt, password=b"pw"))
            offsets.append(unpack_location(w.append(b, 0, lid))[1] - SIZE_PREFIX_SIZE)
        w.close(roll=True)
        bad = bytearray(Path(path).read_bytes())
        bad[offsets[2]:offsets[2] + 4] = struct.pack(">i", 7)
        bad[offsets[18]:offsets[18] + 4] = struct.pack(">i", 0)
        ref = read_entry_log(path, bytes(bad))
        got = scan_entry_log(path, data=bytes(bad), window=4096)
        want = [(offsets[2], int(Damage.BAD_SIZE), offsets[3]), (offsets[18], int(Damage.ZERO_SIZE), offsets[19])]
        assert [(p.offset, int(p.reason), p.resumed_at) for p in ref.problems] == want
        assert got.problems.tolist() == want
        assert [r.offset for r in ref.records] == [o for k, o in enumerate(offsets) if k not in (2, 18)]
        assert got.entries["offset"].tolist() == [r.offset for r in ref.records]


def test_a_log_damaged_in_many_places_resyncs_as_the_reference_reads_it():
    """Ledgers most of whose digests cannot be checked (HMAC), a few CRC32C ones, the size fields of
    40 entries damaged at once: the walk, which does not search again where an earlier resync found no
    entry that proves itself, takes up where the reference reader (which searches afresh) does."""
    def digest_of(lid: int) -> DigestType:
        return DigestType.CRC32C if lid % 25 == 0 else DigestType.HMAC

    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as d:
        path, offsets = _log(d, 9, "integers", digest_of)
        bad = Path(path).read_bytes()
        for i in sorted(rng.sample(range(len(offsets) - 1), 40)):
            bad = _damaged(bad, offsets[i], i % 3, rng)
        ref = read_entry_log(path, bad)
        got = scan_entry_log(path, data=bad, window=4096)
        assert len(ref.problems) >= 10
        assert [(p.offset, int(p.reason), p.resumed_at) for p in ref.problems] == got.problems.tolist()
        assert [r.offset for r in ref.records] == got.entries["offset"].tolist()


def test_a_resync_does_not_search_again_where_an_earlier_one_found_no_entry_proving_itself():
    """The walk's resync directly, over 70 MiB of zeros holding: two HMAC entries at 3 MiB; at 10 MiB a
    header whose record runs over the one CRC32C entry, at 65 MiB, and ends where an HMAC entry follows
    it. Damage at 0 finds no entry proving itself within PROOF_REACH and takes up at the first HMAC
    entry. Damage just inside it, told where that search stopped, still finds the CRC32C entry (its own
    search reaches it), so the header at 10 MiB, whose record passes over it, is refused, as a search
    from scratch refuses it; a search told wrongly that nothing proves itself would take it up."""
    from bkdisk.diskio.config import best_crc_variant
    from bkdisk.entrylogs.reader import PROOF_REACH
    from bkdisk.entrylogs.resync import resync_point
    from bkdisk.formats.entry import ENTRY_V1_HEADER
    from bkdisk.formats.entrylog import ENTRY_SIZE

    buf = np.zeros(70 << 20, np.uint8)

    def put(at: int, lid: int, e: int, dt: DigestType) -> int:
        b = build_entry(package_entry(ledger_id=lid, entry_id=e, last_add_confirmed=e - 1, length=100,
                                      payload=bytes(range(100)), digest_type=dt, password=b"pw"))
        rec = ENTRY_SIZE.build(len(b)) + b
        buf[at:at + len(rec)] = np.frombuffer(rec, np.uint8)
        return at + len(rec)

    first_hmac = 3 << 20
    put(put(first_hmac, 5, 0, DigestType.HMAC), 5, 1, DigestType.HMAC)
    crc_at = 65 << 20
    crc_end = put(crc_at, 7, 0, DigestType.CRC32C)
    put(crc_end, 5, 2, DigestType.HMAC)
    spanner = 10 << 20
    head = ENTRY_SIZE.build(crc_end - spanner - SIZE_PREFIX_SIZE) + ENTRY_V1_HEADER.build(
        dict(ledger_id=5, entry_id=1000, last_add_confirmed=999, length=0))
    buf[spanner:spanner + len(head)] = np.frombuffer(head, np.uint8)
    end, last_nonzero, variant = buf.size, int(np.flatnonzero(buf)[-1]), best_crc_variant()
    resumed, unproved_to = resync_point(buf, 0, end, last_nonzero, variant, 0)
    assert resumed == first_hmac and PROOF_REACH - 64 <= unproved_to <= PROOF_REACH
    damage = first_hmac + 1
    assert resync_point(buf, damage, end, last_nonzero, variant, unproved_to) == (crc_at, crc_at)
    assert resync_point(buf, damage, end, last_nonzero, variant, 0) == (crc_at, crc_at)
