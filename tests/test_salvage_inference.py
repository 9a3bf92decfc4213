"""Salvage's inference: ledgers placed by BookKeeper's rules (RoundRobinDistributionSchedule, ensemble
changes replacing only failed positions at LAC + 1), copies dropped at random; the inference gives back
the truth, or says what it cannot know, and never names a bookie no copy shows."""
from __future__ import annotations

import json

from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.bookie.salvage_inference import BookieLedger, Copy, salvage_ledger
from bkdisk.bookie.salvage_placement import ASSUMED, CERTAIN, ensemble_at, write_set
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType, master_key
from bkdisk.formats.ids import LedgerId

POOL = [f"bk-{i}" for i in range(7)]
MANIFEST = GOLDEN / "cluster-3" / "manifest.json"


@st.composite
def ledgers(draw):
    e_size = draw(st.integers(1, 4))
    qw = draw(st.integers(1, e_size))
    n = draw(st.integers(1, 40))
    ens = draw(st.permutations(POOL))[:e_size]
    ensembles = [(0, list(ens))]
    for k in sorted(set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=3)))):
        if k >= n:
            continue
        cur = list(ensembles[-1][1])
        spare = [b for b in POOL if b not in cur]
        failed = draw(st.sets(st.integers(0, e_size - 1), min_size=1, max_size=min(e_size, len(spare))))
        for p, b in zip(sorted(failed), draw(st.permutations(spare))):
            cur[p] = b
        ensembles.append((k, cur))
    dtype = draw(st.sampled_from(list(DigestType)))
    sizes = draw(st.lists(st.integers(0, 300), min_size=n, max_size=n))
    return e_size, qw, ensembles, dtype, sizes


def _copies(e_size, qw, ensembles, dtype, sizes, keep=lambda e, b: True, damaged=lambda e, b: False):
    out, total = [], 0
    for e, size in enumerate(sizes):
        total += size
        for p in write_set(e, e_size, qw):
            b = ensemble_at(ensembles, e)[p]
            if keep(e, b):
                bad = damaged(e, b)
                out.append(Copy(b, e, not bad, not bad and dtype in (DigestType.CRC32, DigestType.CRC32C),
                                max(-1, e - 1), total, 32 + DIGEST_LENGTH[dtype] + size))
    return out


def _keys(ensembles, password=b"pw"):
    return [BookieLedger(b, master_key(password)) for b in {b for _f, e in ensembles for b in e}]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers())
def test_every_copy_found_gives_back_each_write_set_and_recovery_close(case):
    e_size, qw, ensembles, dtype, sizes = case
    s = salvage_ledger(LedgerId(0, 7), _copies(*case), _keys(ensembles), [b"other", b"pw"])
    assert s.write_quorum.value == qw
    assert s.password.value == b"pw" and s.password.confidence == CERTAIN
    assert s.digest_type.value == dtype.name
    assert s.last_entry_id.value == len(sizes) - 1 and s.length.value == sum(sizes)
    assert s.lost_entries == [] and s.under_replicated == []
    md = s.metadata
    assert md is not None and md.state == "CLOSED" and md.ensemble_size >= qw >= md.ack_quorum
    conf = dict(zip([f for f, _e in s.ensembles.value], s.positions.value))
    for e in range(len(sizes)):
        true_ws = [ensemble_at(ensembles, e)[p] for p in write_set(e, e_size, qw)]
        got_pos = write_set(e, md.ensemble_size, md.write_quorum)
        got_ws = [md.ensemble_at(e)[p] for p in got_pos]
        assert set(got_ws) == set(true_ws)
        first = max(f for f, _e in md.ensembles if f <= e)
        if md.ensemble_size == e_size:
            for i, p in enumerate(got_pos):
                if conf[first][p] == CERTAIN:
                    assert got_ws[i] == true_ws[i], (e, i)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_with_copies_dropped_or_damaged_no_bookie_is_invented_and_losses_are_named(case, data):
    e_size, qw, ensembles, dtype, sizes = case
    gone = data.draw(st.sets(st.tuples(st.integers(0, len(sizes) - 1), st.sampled_from(POOL)), max_size=20))
    bad = data.draw(st.sets(st.tuples(st.integers(0, len(sizes) - 1), st.sampled_from(POOL)), max_size=5))
    copies = _copies(*case, keep=lambda e, b: (e, b) not in gone, damaged=lambda e, b: (e, b) in bad)
    s = salvage_ledger(LedgerId(0, 7), copies, _keys(ensembles), [b"pw"])
    holding = {c.bookie for c in copies}
    if s.ensembles.value is None:
        assert not copies and s.metadata is None
        return
    for _f, ens in s.ensembles.value:
        assert all(b is None or b in holding for b in ens)
    intact = {c.entry for c in copies if c.intact}
    last = s.last_entry_id.value
    assert s.lost_entries == [e for e in range(last + 1) if e not in intact]
    assert last + 1 not in intact
    assert all(c.entry <= last for c in copies) or s.dropped_entries
    if s.metadata is not None:
        assert all(b is not None for _f, e in s.metadata.ensembles for b in e)
        assert s.metadata.last_entry_id == last


def test_an_unknown_password_writes_no_metadata_and_names_the_master_key():
    ens = [(0, ["a", "b", "c"])]
    s = salvage_ledger(LedgerId(0, 1), _copies(3, 2, ens, DigestType.CRC32, [5, 6, 7]), _keys(ens, b"secret"), [])
    assert s.metadata is None and s.password.value is None
    assert master_key(b"secret").hex() in s.no_metadata_because and "add candidates" in s.no_metadata_because


def test_a_position_no_disk_shows_is_reported_never_invented():
    # E=3, Qw=2, one entry: position 2 holds nothing; with a fourth entry on it missing too.
    ens = [(0, ["a", "b", "c"])]
    copies = _copies(3, 2, ens, DigestType.CRC32C, [1, 2, 3, 4], keep=lambda e, b: b != "c")
    s = salvage_ledger(LedgerId(0, 1), copies, _keys(ens), [b"pw"])
    assert all(b in ("a", "b", None) for _f, e in s.ensembles.value for b in e)
    assert s.under_replicated   # the entries c should hold


def test_equal_write_quorum_and_ensemble_leave_the_order_assumed():
    ens = [(0, ["c", "a", "b"])]
    s = salvage_ledger(LedgerId(0, 1), _copies(3, 3, ens, DigestType.DUMMY, [1, 2]), _keys(ens, b""), [])
    assert s.metadata is not None and s.password.value == b""
    assert set(s.metadata.ensembles[0][1]) == {"a", "b", "c"} and s.ensembles.confidence == ASSUMED


def test_golden_cluster3_rows_give_its_metadata():
    m = json.loads(MANIFEST.read_text())
    by_ledger: dict[str, list[Copy]] = {}
    for r in m["entries"]:
        for b in r["bookies"]:
            by_ledger.setdefault(r["ledger_id"], []).append(Copy(
                b, r["entry_id"], True, r["digest_type"] in ("CRC32", "CRC32C"), r["last_add_confirmed"],
                r["ledger_length_after_entry"], r["stored_length"]))
    for lg in m["ledgers"]:
        keys = [BookieLedger(b, bytes.fromhex(lg["master_key_hex"]),
                             lg["explicit_lac"] if b in lg["explicit_lac_sent_to"] else None)
                for e in lg["ensembles"] for b in e["bookies"]]
        s = salvage_ledger(LedgerId(0, int(lg["ledger_id"])), by_ledger[lg["ledger_id"]], keys,
                           [bytes.fromhex(x["password_hex"]) for x in m["ledgers"]])
        md = s.metadata
        assert md is not None, s.no_metadata_because
        assert (md.ensemble_size, md.write_quorum, md.digest_type, md.password, md.last_entry_id, md.length) == (
            lg["ensemble_size"], lg["write_quorum_size"], lg["digest_type"], bytes.fromhex(lg["password_hex"]),
            lg["last_entry_id"], lg["length"]), lg["ledger_id"]
        truth = [(e["first_entry_id"], tuple(e["bookies"])) for e in lg["ensembles"]]
        for r in (r for r in m["entries"] if r["ledger_id"] == lg["ledger_id"]):
            got = [md.ensemble_at(r["entry_id"])[p]
                   for p in write_set(r["entry_id"], md.ensemble_size, md.write_quorum)]
            if md.write_quorum < md.ensemble_size:
                assert got == r["write_set"], (lg["ledger_id"], r["entry_id"])
                assert [f for f, _e in md.ensembles] == [f for f, _e in truth]
            else:
                assert set(got) == set(r["write_set"])


def test_golden_cluster3_without_one_disk_names_the_unknown_position_and_never_its_bookie():
    m = json.loads(MANIFEST.read_text())
    gone = "bk-2.rack-a"
    by_ledger: dict[str, list[Copy]] = {}
    for r in m["entries"]:
        for b in r["bookies"]:
            if b != gone:
                by_ledger.setdefault(r["ledger_id"], []).append(Copy(
                    b, r["entry_id"], True, True, r["last_add_confirmed"], r["ledger_length_after_entry"],
                    r["stored_length"]))
    for lg in m["ledgers"]:
        keys = [BookieLedger(b, bytes.fromhex(lg["master_key_hex"])) for b in ("bk-1.rack-a", "bk-3.rack-b")]
        s = salvage_ledger(LedgerId(0, int(lg["ledger_id"])), by_ledger[lg["ledger_id"]], keys,
                           [bytes.fromhex(x["password_hex"]) for x in m["ledgers"]])
        assert all(b != gone for _f, e in s.ensembles.value for b in e)
        if lg["write_quorum_size"] < lg["ensemble_size"] or len(lg["ensembles"]) > 1:
            # bk-2's positions were written to: unknown, so no metadata file
            assert s.metadata is None and "no read disk holds its copies" in s.no_metadata_because
            truth = {e["first_entry_id"]: e["bookies"] for e in lg["ensembles"]}
            assert s.ensemble_size.value == lg["ensemble_size"]
            for first, ens in s.ensembles.value:
                assert [b if b != gone else None for b in truth[first]] == list(ens)
        else:   # every entry on every bookie: the copies on the two disks read are all there is to see
            assert s.metadata is not None and s.write_quorum.confidence != CERTAIN


def test_an_explicit_lac_past_every_entry_lac_carries_recovery_over_a_lost_entry():
    # a pipelined writer: entry e carries LAC e - 3; entry 8 lost on every copy; explicit LAC 9 was sent
    ens = [(0, ["a", "b"])]
    copies = [c for c in _copies(2, 2, ens, DigestType.CRC32, [10] * 10) if c.entry != 8]
    copies = [Copy(c.bookie, c.entry, c.intact, c.verified, max(-1, c.entry - 3), c.length, c.size) for c in copies]
    keys = [BookieLedger("a", master_key(b"pw"), 9), BookieLedger("b", master_key(b"pw"))]
    s = salvage_ledger(LedgerId(0, 1), copies, keys, [b"pw"])
    assert (s.last_entry_id.value, s.lost_entries, s.length.value) == (9, [8], 100)
    s = salvage_ledger(LedgerId(0, 1), copies, [BookieLedger("a", master_key(b"pw"))], [b"pw"])
    assert (s.last_entry_id.value, s.dropped_entries) == (7, [9])   # without it: recovery stops before 8


def test_an_hmac_ledger_is_certain_only_when_its_digests_verify_with_the_matched_password():
    ens = [(0, ["a", "b", "c"])]
    copies = _copies(3, 2, ens, DigestType.HMAC, [4, 5, 6])
    seen = []

    def check(ok, bad):
        def f(pw, cs):
            seen.append((pw, len(cs)))
            return ok, bad
        return f
    s = salvage_ledger(LedgerId(0, 1), copies, _keys(ens), [b"pw"], hmac_check=check(3, 0))
    assert s.digest_type.confidence == CERTAIN and "confirmed by the HMAC" in s.password.why
    assert seen == [(b"pw", 3)]
    s = salvage_ledger(LedgerId(0, 1), copies, _keys(ens), [b"pw"], hmac_check=check(1, 2))
    assert s.digest_type.confidence != CERTAIN and "2 copies fail HMAC" in s.digest_type.why
    s = salvage_ledger(LedgerId(0, 1), copies, _keys(ens), [], hmac_check=check(3, 0))
    assert s.digest_type.confidence != CERTAIN and s.metadata is None   # no password: nothing to verify with


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_intact_copies_that_disagree_write_no_metadata_and_say_which_entry(case, data):
    """Every copy of an entry is the bytes its writer sent: two that pass their digests (a DUMMY copy has none, a
    CRC can be recomputed) yet differ leave unknown which was written; no metadata, the entry named. Copies that
    agree (the same payload hash on every bookie) change nothing."""
    e_size, qw, ensembles, dtype, sizes = case
    copies = _copies(e_size, qw, ensembles, dtype, sizes)
    same = [Copy(**{**vars(c), "payload": f"h{c.entry}"}) for c in copies]
    whole = salvage_ledger(LedgerId(0, 7), same, _keys(ensembles), [b"pw"])
    assert whole.metadata is not None, whole.no_metadata_because
    held = sorted({c.entry for c in same if sum(d.entry == c.entry for d in same) > 1})
    if not held:
        return                                   # (write quorum 1: no entry has two copies to compare)
    e = data.draw(st.sampled_from(held))
    field = data.draw(st.sampled_from(["payload", "length", "size"]))
    k = next(i for i, c in enumerate(same) if c.entry == e)
    bent = list(same)
    bent[k] = Copy(**{**vars(same[k]), field: "other" if field == "payload" else getattr(same[k], field) + 5000})
    s = salvage_ledger(LedgerId(0, 7), bent, _keys(ensembles), [b"pw"])
    assert s.metadata is None and f"entry {e} on its" in s.no_metadata_because, s.no_metadata_because
    assert field in s.no_metadata_because


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_copies_sent_again_by_recovery_or_re_replication_are_not_divergent(case, data):
    """Recovery and re-replication send an entry again with the LAC of the handle that sends it (and a digest
    over that; at most the ledger's last entry): another LAC is not another entry. A copy in the other entry
    format has another stored size, and a scrub's light walk keeps a short payload hash (a prefix of the
    full one): neither disagrees."""
    e_size, qw, ensembles, dtype, sizes = case
    copies = [Copy(**{**vars(c), "payload": f"{c.entry:016x}" + "ab" * 24}) for c in _copies(e_size, qw, ensembles,
                                                                                          dtype, sizes)]
    held = sorted({c.entry for c in copies if sum(d.entry == c.entry for d in copies) > 1})
    if not held:
        return                                   # (write quorum 1: no entry has two copies to compare)
    bent, last = list(copies), max(c.entry for c in copies)
    for e in data.draw(st.lists(st.sampled_from(held), min_size=1, unique=True)):
        k = next(i for i, c in enumerate(bent) if c.entry == e)
        c = bent[k]
        how = data.draw(st.sampled_from(["lac", "format", "short hash"]))
        bent[k] = Copy(**{**vars(c), **({"lac": data.draw(st.integers(c.lac, last))} if how == "lac" else
                                        {"entry_format": 3 - c.entry_format, "size": c.size + 9} if how == "format"
                                        else {"payload": c.payload[:16]})})
    s = salvage_ledger(LedgerId(0, 7), bent, _keys(ensembles), [b"pw"])
    assert s.metadata is not None, s.no_metadata_because


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.data())
def test_a_bookie_whose_disk_was_not_given_leaves_no_metadata_when_entries_have_no_copy(case, data):
    """With a bookie's disk missing, the entries only it and other missing bookies held have no copy at all:
    ensembles inferred from the rest would leave out the bookies holding them (BookKeeper would never read
    those copies, and its collector would delete them as over-replicated). No metadata, the entries named.
    Damaged copies are different: the disk was read, the entry is lost, the placement still stands."""
    e_size, qw, ensembles, dtype, sizes = case
    bookies = sorted({b for _f, e in ensembles for b in e})
    gone = set(data.draw(st.lists(st.sampled_from(bookies), min_size=1, max_size=len(bookies) - 1, unique=True))
               if len(bookies) > 1 else [])
    copies = _copies(e_size, qw, ensembles, dtype, sizes, keep=lambda e, b: b not in gone)
    held = {c.entry for c in copies}
    s = salvage_ledger(LedgerId(0, 7), copies, _keys(ensembles), [b"pw"])
    last = s.last_entry_id.value
    absent = [e for e in range(len(sizes)) if e not in held and last is not None and e <= last]
    if not held:
        assert s.metadata is None
    elif absent:
        assert s.metadata is None and f"(entry {absent[0]} first)" in s.no_metadata_because, s.no_metadata_because
        assert "have no copy on any disk given" in s.no_metadata_because
    damaged = _copies(e_size, qw, ensembles, dtype, sizes, damaged=lambda e, b: e == len(sizes) // 2)
    if len(sizes) > 2:      # every copy of a middle entry damaged: lost, and still written
        s = salvage_ledger(LedgerId(0, 7), damaged, _keys(ensembles), [b"pw"])
        assert len(sizes) // 2 in s.lost_entries or s.last_entry_id.value < len(sizes) // 2
        assert "no copy on any disk given" not in (s.no_metadata_because or "")


def test_one_disk_of_a_round_robin_ledger_gives_no_metadata():
    """E 3, Qw 2 over bk-a, bk-b, bk-c and only bk-a's disk: every third entry has no copy, and E 1 / Qw 1
    over bk-a alone (what the copies found fit) would be metadata BookKeeper serves wrongly."""
    ensembles = [(0, ["bk-a", "bk-b", "bk-c"])]
    copies = _copies(3, 2, ensembles, DigestType.CRC32C, [100] * 30, keep=lambda e, b: b == "bk-a")
    s = salvage_ledger(LedgerId(0, 7), copies, _keys(ensembles), [b"pw"])
    assert s.metadata is None
    assert s.no_metadata_because.startswith("10 entries at or before the last (29) have no copy on any disk given "
                                            "(entry 1 first)"), s.no_metadata_because


def test_an_explicit_lac_past_every_entry_found_is_no_close_point_and_withholds_the_metadata():
    """A damaged explicit LAC (2^63 - 16, or 1000 for a ledger of 10 entries) is not followed to a close
    point no entry reaches (which listed every id up to it as lost, or never returned); the ledger gets no
    metadata, and the reason names the LAC and whose it is."""
    import time
    ens = [(0, ["a", "b"])]
    copies = _copies(2, 2, ens, DigestType.CRC32, [10] * 10)
    for lac in (1000, 2**63 - 16):
        t0 = time.monotonic()
        s = salvage_ledger(LedgerId(0, 1), copies, [BookieLedger("a", master_key(b"pw"), lac),
                                                    BookieLedger("b", master_key(b"pw"))], [b"pw"])
        assert time.monotonic() - t0 < 10
        assert (s.last_entry_id.value, s.lost_entries, s.metadata) == (9, [], None)
        assert s.no_metadata_because == (f"a's explicit LAC {lac} is past every entry found (the highest is 9): "
                                         "entries up to it were acknowledged and no disk given holds them (a "
                                         "bookie's disk was not given), or that LAC is damaged")


def test_a_copy_whose_lac_is_not_below_its_own_id_carries_no_lac():
    ens = [(0, ["a", "b"])]
    copies = [c for c in _copies(2, 2, ens, DigestType.CRC32, [10] * 10) if c.entry != 8]
    bad = [Copy(c.bookie, c.entry, c.intact, c.verified, 2**62 if c.entry == 3 else max(-1, c.entry - 3), c.length,
                c.size) for c in copies]   # (a pipelined writer: entry e carries LAC e - 3)
    s = salvage_ledger(LedgerId(0, 1), bad, _keys(ens), [b"pw"])
    assert (s.last_entry_id.value, s.dropped_entries, s.lost_entries) == (7, [9], [])
    assert s.metadata is not None and s.metadata.last_entry_id == 7


def test_a_recovery_point_far_past_the_entries_lists_a_bounded_number_lost():
    from bkdisk.bookie import salvage_inference
    ens = [(0, ["a", "b"])]
    copies = _copies(2, 2, ens, DigestType.CRC32, [10] * 3)
    far = [Copy(b, 2**62, True, True, 2**62 - 1, 40, 50) for b in ("a", "b")]
    s = salvage_ledger(LedgerId(0, 1), copies + far, _keys(ens), [b"pw"])
    assert s.metadata is None and len(s.lost_entries) == salvage_inference.LOST_LISTED
    assert s.lost_entries[:2] == [3, 4]


def test_a_next_entry_whose_every_copy_is_damaged_fails_recovery_and_one_with_no_copy_closes_it():
    """LedgerRecoveryOp closes on "no such entry" only: entries 7-9 stored but every copy failing its digest
    fail the recovery (no metadata; before, the ledger was closed at 6); no copy of 7 at all closes it at 6."""
    ens = [(0, ["a", "b", "c"])]
    damaged = _copies(3, 2, ens, DigestType.CRC32C, [10] * 10, damaged=lambda e, b: e >= 7)
    s = salvage_ledger(LedgerId(0, 1), damaged, _keys(ens), [b"pw"])
    assert (s.last_entry_id.value, s.dropped_entries, s.metadata) == (6, [7, 8, 9], None)
    assert s.no_metadata_because == ("entry 7 has copies (b, c) and none is intact: BookKeeper's recovery fails on "
                                     "that read, it does not close the ledger before it (3 entries from it on would "
                                     "be left out)")
    gone = [Copy(c.bookie, c.entry, c.intact, c.verified, max(-1, c.entry - 3), c.length, c.size)   # (pipelined)
            for c in _copies(3, 2, ens, DigestType.CRC32C, [10] * 10, keep=lambda e, b: e != 7)]
    s = salvage_ledger(LedgerId(0, 1), gone, _keys(ens), [b"pw"])
    assert (s.last_entry_id.value, s.dropped_entries) == (6, [8, 9]) and s.metadata is not None


def test_copies_a_bookies_index_holds_and_its_log_lost_keep_it_in_the_ensemble():
    """A bookie whose entry log was cut lacks every copy past the cut. Left out, the cheapest model replaced
    it by a bookie no disk shows (no metadata, blamed on a missing disk); as the damaged copies its index
    says it stored (salvage_job.unreadable_copies), the ensemble stands and those entries are under-replicated."""
    ens = [(0, ["a", "b", "c", "d"])]
    sizes = [10] * 100
    gone = _copies(4, 2, ens, DigestType.CRC32C, sizes, keep=lambda e, b: b != "b" or e < 50)
    blind = salvage_ledger(LedgerId(0, 1), gone, _keys(ens), [b"pw"])
    assert blind.metadata is None and "its bookie is unknown" in blind.no_metadata_because
    held = _copies(4, 2, ens, DigestType.CRC32C, sizes, damaged=lambda e, b: b == "b" and e >= 50)
    s = salvage_ledger(LedgerId(0, 1), held, _keys(ens), [b"pw"])
    assert s.metadata is not None and s.metadata.ensembles == ((0, ("a", "b", "c", "d")),)
    assert s.under_replicated == [e for e in range(50, 100) if "b" in (ens[0][1][e % 4], ens[0][1][(e + 1) % 4])]
    assert s.lost_entries == []
