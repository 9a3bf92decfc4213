"""The divergence check across light runs (``--state``) on a real Spark session: the state keeps each
deep-checked log's short payload hash per entry, so two bookies' copies that differ are reported while
one copy's log is walked light; the hashes live per disk and log in the state folder and follow it."""
from __future__ import annotations

import os

import pytest
from test_audit_scrub import DAY, T0, audit, cluster, deep_on, spark, written  # noqa: F401 - fixtures
from test_audit_scrub_faults import light_on, log_path

from bkdisk.audit.scrub_hashes import log_file
from bkdisk.audit.scrub_state import read_state
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import package_entry
from bkdisk.formats.index import unpack_location

pytestmark = pytest.mark.slow   # real Spark audits, two runs


def test_copies_that_differ_are_divergent_while_one_copy_is_walked_light(spark, written, cluster, tmp_path):  # noqa: F811
    root, disks = cluster
    state = tmp_path / "state"
    audit(spark, disks, root, tmp_path / "out", state=state, day=0)
    paths = dict(zip(written.bookie_roots, (d.path for d in disks)))
    known = read_state(str(state))
    hashed = {path: {k for k in d.logs if os.path.exists(log_file(str(state), path, k))} for path, d in known.items()}
    for path, d in known.items():   # the logs deep-checked on day 0 (those holding entries) have their hashes
        assert hashed[path] and all(d.logs[k].last_deep == T0 for k in hashed[path])
    # the logs walked light on day 1 whose copies have a hash from day 0
    light = {b: light_on(state, paths[b]) & hashed[paths[b]] for b in written.bookie_roots}

    def log_of(b, key):
        return unpack_location(written.bookies[b].locations[key])[0]
    # An entry of a ledger with a real digest whose copies other than one bookie's are all in those
    # logs: that bookie's copy is rewritten with another payload (a valid digest).
    real = {x.lid for wb in written.bookies.values() for x in wb.spec.ledgers if x.digest_type != DigestType.DUMMY}
    key, bookie = next((k, b) for k, ws in sorted(written.placement.items()) if k[0] in real and len(ws) >= 2
                       for b in sorted(ws) if all(log_of(o, k) in light[o] for o in ws if o != b))
    (lid, eid) = key
    ledger = next(x for x in written.bookies[bookie].spec.ledgers if x.lid == lid)
    ids = ledger.entry_ids or list(range(ledger.first_entry, ledger.first_entry + len(ledger.payloads)))
    at = ids.index(eid)
    old = written.bookies[bookie].entries[key]
    length = ledger.lengths[at] if ledger.lengths else sum(len(p) for p in ledger.payloads[:at + 1])
    new = package_entry(ledger_id=lid.ledger, entry_id=eid, last_add_confirmed=eid - 1, length=length,
                        payload=bytes(x ^ 0x5A for x in ledger.payloads[at]), digest_type=ledger.digest_type,
                        password=ledger.password, scope_id=lid.scope).to_bytes()
    assert len(new) == len(old)
    log_id, pos = unpack_location(written.bookies[bookie].locations[key])
    path = root / os.path.relpath(log_path(written.bookie_roots[bookie], log_id), written.root)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(new)
    t1, _s = audit(spark, disks, root, tmp_path / "out", state=state, day=1)
    for o in written.placement[key]:
        if o != bookie:   # the other copies were not read: compared by their last deep check's hashes
            assert log_of(o, key) not in deep_on(state, paths[o], T0 + DAY)
    div = {(r["ledger_id"], r["entry_id"]): r for r in t1["divergent"].to_pylist()}
    assert (lid.ledger, eid) in div, div
    copies = div[(lid.ledger, eid)]["copies"]
    assert sorted(b for c in copies for b in c["bookies"]) == sorted(written.placement[key])
    assert any(bookie in c["bookies"] and len(c["payload_sha256"]) == 64 for c in copies)   # read now: whole
    assert t1["corrupt_copies"].num_rows == 0
