"""The audit with a scrub state (``--state``) on a real Spark session, the faults a nightly run must
catch on time: a log a bookie appended to is deep-checked on the next run (its appended copy's bad
digest found then); an entry whose bytes are gone and a ledger with no copy left on a disk are found
by the next run, with their logs walked light (their identities did not change)."""
from __future__ import annotations

import os

import pytest
from test_audit_scrub import DAY, T0, audit, cluster, deep_on, spark, written  # noqa: F401 - fixtures

from bkdisk.audit.scrub_state import read_state
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.index import unpack_location
from bkdisk.formats.paths import entry_log_name

pytestmark = pytest.mark.slow   # real Spark audits, two runs each


def log_path(disk: str, log_id: int) -> str:
    return next(os.path.join(dp, n) for dp, _d, ns in os.walk(disk) for n in ns if n == entry_log_name(log_id))


def light_on(state, disk: str, day: int = 1) -> set[int]:
    """The logs of ``disk`` the run of ``day`` will not deep-check (due after it; none is new or changed)."""
    return {lid for lid, s in read_state(str(state))[disk].logs.items() if s.due_at > T0 + day * DAY + DAY / 2}


def zero_entries(w, root, bookie: str, keys) -> set[int]:
    """Zero the records (size prefix and entry) of ``keys`` on ``bookie`` of the cluster ``w`` wrote,
    keeping each log's mtime: the bytes the index points at are gone, the logs' identities unchanged.
    The logs touched."""
    wb = w.bookies[bookie]
    touched = set()
    for key in keys:
        log_id, pos = unpack_location(wb.locations[key])
        path = root / os.path.relpath(log_path(w.bookie_roots[bookie], log_id), w.root)
        st = os.stat(path)
        with open(path, "r+b") as f:
            f.seek(pos - SIZE_PREFIX_SIZE)
            f.write(bytes(SIZE_PREFIX_SIZE + len(wb.entries[key])))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        touched.add(log_id)
    return touched


def test_a_log_appended_to_is_deep_checked_on_the_next_run(spark, written, cluster, tmp_path):  # noqa: F811
    """The bookie adds an entry at the end of its current log (a copy of an entry it holds, whose
    payload arrives damaged): size and mtime change, so the next run deep-reads the log and finds
    the copy's digest failing; a light walk would not."""
    root, disks = cluster
    state = tmp_path / "state"
    current_log = {b: max(int(os.path.basename(p)[:-4], 16) for p in wb.entry_log_files)
                   for b, wb in written.bookies.items()}
    # A disk whose current log the next run reads light. Where each disk's falls due on the next run (the
    # schedule's order is seeded by the disk's path), that run deep-reads it, and the run after reads it light.
    for day in (0, 1):
        audit(spark, disks, root, tmp_path / "out", state=state, day=day)
        i, bookie = next(((i, b) for i, b in enumerate(written.bookies)
                          if current_log[b] in light_on(state, disks[i].path, day + 1)), (None, None))
        if bookie is not None:
            break
    assert bookie is not None, "every disk's current log is read light the run after it was deep-read"
    wb, current = written.bookies[bookie], current_log[bookie]
    real = {x.lid for x in wb.spec.ledgers if x.digest_type != DigestType.DUMMY}   # a digest that can fail
    (lid, eid) = key = max(k for k in wb.locations if unpack_location(wb.locations[k])[0] == current and k[0] in real)
    entry = bytearray(wb.entries[key])
    entry[-1] ^= 0x80   # the payload's last byte, damaged in flight: the digest fails
    path = log_path(disks[i].path, current)
    with open(path, "ab") as f:
        f.write(len(entry).to_bytes(SIZE_PREFIX_SIZE, "big") + bytes(entry))
    t1, _s = audit(spark, disks, root, tmp_path / "out", state=state, day=day + 1)
    assert current in deep_on(state, disks[i].path, T0 + (day + 1) * DAY)
    bad = {(r["bookie_id"], r["ledger_id"], r["entry_id"]) for r in t1["corrupt_copies"].to_pylist()}
    assert (bookie, lid.ledger, eid) in bad, bad
    assert read_state(str(state))[disks[i].path].logs[current].identity.size == os.path.getsize(path)


def test_an_entry_whose_bytes_are_gone_and_a_lost_ledger_are_found_by_the_next_light_run(
        spark, written, cluster, tmp_path):  # noqa: F811
    """On one bookie, an entry's record zeroed in a log walked light on the next run (the index points
    at bytes that are gone); on another, every record of one ledger zeroed, in logs walked light,
    and its index file removed: no copy of it is left there (``missing_ledgers``)."""
    root, disks = cluster
    state = tmp_path / "state"
    t0, _s = audit(spark, disks, root, tmp_path / "out", state=state, day=0)
    assert t0["missing_ledgers"].num_rows == 0 and t0["under_replicated"].num_rows == 0
    bookies = list(written.bookie_roots)
    b_entry, b_ledger = bookies[0], bookies[1]
    light0, light1 = light_on(state, disks[0].path), light_on(state, disks[1].path)
    wb0, wb1 = written.bookies[b_entry], written.bookies[b_ledger]
    gone = min(k for k, loc in wb0.locations.items() if unpack_location(loc)[0] in light0)
    per_ledger: dict = {}
    for k, loc in wb1.locations.items():
        per_ledger.setdefault(k[0], set()).add(unpack_location(loc)[0])
    lost = min(lid for lid, logs in per_ledger.items() if logs <= light1)
    zero_entries(written, root, b_entry, [gone])
    touched = zero_entries(written, root, b_ledger, [k for k in wb1.locations if k[0] == lost])
    os.unlink(root / os.path.relpath(wb1.index_files[lost], written.root))
    t1, _s = audit(spark, disks, root, tmp_path / "out", state=state, day=1)
    assert not deep_on(state, disks[0].path, T0 + DAY) & {unpack_location(wb0.locations[gone])[0]}
    assert not deep_on(state, disks[1].path, T0 + DAY) & touched   # found by the light walk
    short = {(b, r["ledger_id"], e) for r in t1["under_replicated"].to_pylist() for b in r["bookies_missing"]
             for e in range(r["first_entry_id"], r["last_entry_id"] + 1)}
    assert (b_entry, gone[0].ledger, gone[1]) in short
    assert {(r["ledger_id"], r["bookie_id"]) for r in t1["missing_ledgers"].to_pylist()} == {(lost.ledger, b_ledger)}
