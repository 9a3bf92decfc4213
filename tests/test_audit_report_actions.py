"""The report tells the person on call what to do: one line per cause naming its ledgers (with their
Pulsar topics) and bookies, and its action (BookKeeper's recover command, `bookie-fsck --repair`,
`bkdisk salvage` or `bkdisk metadata import`, or nothing: reclaimable); copies in a bookie's entry
logs its index does not hold said apart from missing ones; a bookie's fsck line quoting the cause,
not its consequence; an orphans table; sizes in human units; empty tables left out. From tables
like an audit writes (no Spark), rendered in headless Chromium, a screenshot per scenario."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from bkdisk.audit.report import summarize, write_reports
from tests.report_browser import WIDTH, render
from tests.test_audit_report import DISK, EMPTY, SHOTS, _disks, _write

UNDER = dict(EMPTY["under_replicated"], bookies_not_indexed=pa.list_(pa.string()))
HIST = dict(EMPTY["replication_histogram"], copies_not_indexed=pa.int64())
SPACE = {"bookie_id": pa.string(), "kind": pa.string(), "size": pa.int64(), "action": pa.string(),
         "ledger": pa.string(), "state": pa.string(), "topic": pa.string(), "bytes": pa.int64(),
         "sole_logs": pa.int64(), "frees_bytes": pa.int64(), "pinned_logs": pa.int64()}
TOPIC = "persistent://public/default/payments"
BK = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")


def _space_row(**kw) -> dict:
    return {**dict.fromkeys(SPACE), **kw}


def unindexed_cluster(out: Path) -> dict:
    """bk-2 lost ledger 17's index (and fsck says so beside the consequence), bk-3 (DbLedgerStorage)
    lost ledger 16's locations, bk-1 lost two copies of ledger 289 (a Pulsar topic's) outright."""
    _disks(out, [dict(DISK, bookie_id=BK[0], path="/mnt/bk-1"),
                 dict(DISK, bookie_id=BK[1], path="/mnt/bk-2", status="errors", fsck_exit_code=4),
                 dict(DISK, bookie_id=BK[2], path="/mnt/bk-3", status="errors", fsck_exit_code=4,
                      storage_class="DbLedgerStorage (replicas from its entry logs; RocksDB index checked by fsck)")])
    _write(out, "under_replicated", [
        {"ledger_scope": 0, "ledger_id": 17, "first_entry_id": 0, "last_entry_id": 49, "copies_expected": 3,
         "copies_intact": 2, "bookies_missing": [BK[1]], "bookies_with_copy": [BK[0], BK[2]],
         "bookies_not_audited": [], "bookies_not_indexed": [BK[1]]},
        {"ledger_scope": 0, "ledger_id": 16, "first_entry_id": 1, "last_entry_id": 2, "copies_expected": 2,
         "copies_intact": 1, "bookies_missing": [BK[2]], "bookies_with_copy": [BK[0]],
         "bookies_not_audited": [], "bookies_not_indexed": [BK[2]]},
        {"ledger_scope": 0, "ledger_id": 289, "first_entry_id": 7, "last_entry_id": 8, "copies_expected": 2,
         "copies_intact": 1, "bookies_missing": [BK[0]], "bookies_with_copy": [BK[1]],
         "bookies_not_audited": [], "bookies_not_indexed": []}], UNDER)
    for name in ("corrupt_copies", "divergent", "orphans", "missing_ledgers"):
        _write(out, name, [])
    # fsck's findings in the findings table's order: the consequence (pass 7) sorts before its cause
    _write(out, "findings", [
        {"bookie_id": BK[1], "severity": "error", "code": "ENTRIES_MISSING", "ledger_id": 17, "path": None,
         "message": "expected 50 entries (0-49) of ledger 17 on this bookie (per its ensembles), found none"},
        {"bookie_id": BK[1], "severity": "error", "code": "LEDGER_NOT_INDEXED", "ledger_id": 17, "path": None,
         "message": "expected an index for ledger 17, which its metadata lists and which has 50 entries in the "
                    "entry logs"}])
    _write(out, "replication_histogram", [
        {"copies_expected": 3, "copies_intact": 3, "copies_not_indexed": 0, "entries": 4000},
        {"copies_expected": 3, "copies_intact": 2, "copies_not_indexed": 1, "entries": 50},
        {"copies_expected": 2, "copies_intact": 1, "copies_not_indexed": 1, "entries": 2},
        {"copies_expected": 2, "copies_intact": 1, "copies_not_indexed": 0, "entries": 2}], HIST)
    _write(out, "space", [
        _space_row(bookie_id=BK[0], kind="log", size=3 * 1024 * 1024, action="keep"),
        _space_row(bookie_id=BK[0], kind="ledger", ledger="289", state="live", topic=TOPIC, bytes=2_500_000,
                   pinned_logs=2, sole_logs=1, frees_bytes=1_048_576),
        _space_row(bookie_id=BK[0], kind="ledger", ledger="17", state="live", bytes=40_000, pinned_logs=1,
                   sole_logs=0, frees_bytes=0)], SPACE)
    return summarize(str(out), "unindexed-run", "metadata folder /srv/md", started=dt.datetime.now(dt.UTC))


def orphaned_cluster(out: Path) -> dict:
    """Ledger 17 on every bookie with no metadata (metadata lost?), ledgers 77 and 78 each on one."""
    _disks(out, [dict(DISK, bookie_id=b, path=f"/mnt/{b}") for b in BK])
    for name in ("under_replicated", "corrupt_copies", "divergent", "missing_ledgers", "findings"):
        _write(out, name, [], UNDER if name == "under_replicated" else None)
    _write(out, "orphans", [{"ledger_scope": 0, "ledger_id": 17, "bookie_id": b, "entries": 50, "bytes": 32_870}
                            for b in BK] +
           [{"ledger_scope": 0, "ledger_id": 77, "bookie_id": BK[0], "entries": 12, "bytes": 40_960},
            {"ledger_scope": 0, "ledger_id": 78, "bookie_id": BK[2], "entries": 3, "bytes": 3_000}])
    _write(out, "replication_histogram", [{"copies_expected": 3, "copies_intact": 3, "copies_not_indexed": 0,
                                           "entries": 4000}], HIST)
    return summarize(str(out), "orphaned-run", "metadata folder /srv/md", started=dt.datetime.now(dt.UTC))


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = {}
    for name, build in (("unindexed", unindexed_cluster), ("orphaned", orphaned_cluster)):
        folder = tmp_path_factory.mktemp(name)
        summary = build(folder)
        _js, page = write_reports(str(folder), summary)
        dom, probe = render(Path(page), folder / "chromium", SHOTS / f"actions-{name}.png")
        out[name] = (summary, dom, probe)
    return out


def test_unindexed_copies_are_their_own_line_with_the_repair_and_missing_ones_get_recover(pages):
    s, _dom, _probe = pages["unindexed"]
    ps = s["problems"]
    assert (f"{BK[1]}: 50 copies of ledger 17 in its entry logs, not indexed (the bookie does not serve them); "
            f"entries 17:0-49; `bookie-fsck --repair` on its disk restores its index") in ps
    (db,) = [p for p in ps if p.startswith(f"{BK[2]}: 2 copies of ledger 16 in its entry logs, not indexed")]
    assert "rebuild-db-ledger-locations-index" in db
    # the copies lost outright: named with the topic, re-replicated with BookKeeper's recover command
    assert f"{BK[0]}: 2 missing copies in ledger 289 ({TOPIC}); entries 289:7-8" in ps
    assert (f"{BK[0]}: re-replicate ledger 289 ({TOPIC}) from the other bookies: bin/bookkeeper shell recover "
            f"-l 289 {BK[0]}  (or let autorecovery do it: bin/bookkeeper shell autorecovery -enable)") in ps
    # an unindexed copy is not also called missing, nor re-replicated
    assert not any(p.startswith((f"{BK[1]}: 50 missing", f"{BK[1]}: re-replicate", f"{BK[2]}: re-replicate"))
                   for p in ps), ps


def test_a_bookies_fsck_line_quotes_the_cause_not_its_consequence(pages):
    s, _dom, _probe = pages["unindexed"]
    (line,) = [p for p in s["problems"] if p.startswith(f"{BK[1]}: fsck found 2 errors")]
    assert "the first: LEDGER_NOT_INDEXED expected an index for ledger 17" in line
    assert line.endswith("`bookie-fsck --repair` on its disk")


def test_the_page_shows_not_indexed_counts_human_sizes_and_leaves_empty_tables_out(pages):
    s, dom, probe = pages["unindexed"]
    assert [p["text"] for p in probe["problems"]] == s["problems"]
    bookies = {b["bookie_id"]: b for b in s["bookies"]}
    assert (bookies[BK[1]]["missing_copies"], bookies[BK[1]]["not_indexed_copies"]) == (50, 50)
    assert (bookies[BK[0]]["missing_copies"], bookies[BK[0]]["not_indexed_copies"]) == (2, 0)
    assert "of which not indexed" in dom and "copies not indexed" in dom
    assert "2/3+1" in dom   # the histogram's bar for ledger 17's entries: 2 of 3 intact, 1 not indexed
    space = dom[dom.index('id="space"'):]
    space = space[:space.index("</section>")]
    assert "1.0 MiB" in space and "3.0 MiB" in space and "1048576" not in space
    # ledger 17 frees nothing: not pinning; no topic pins anything: no Topics table
    assert "Ledgers pinning old entry logs" in space and "<td>17</td>" not in space
    assert "Topics pinning" not in space
    assert 'id="orphans"' not in dom   # no orphan: no orphans table
    assert 'data-chart="orphans"' not in dom and 'data-chart="entries"' in dom   # nor a chart of zeros
    assert probe["scrollWidth"] <= WIDTH


def test_orphans_on_a_quorum_read_as_metadata_lost_and_point_at_salvage(pages):
    s, dom, probe = pages["orphaned"]
    ps = s["problems"]
    assert (f"ledger 17 on {', '.join(BK)}, no metadata names it (150 entries, 96.3 KiB): metadata lost? "
            "`bkdisk salvage` rebuilds metadata from the copies, or `bkdisk metadata import` restores it from an "
            "export; if deleted on purpose, compaction reclaims the space") in ps
    assert (f"ledgers 77, 78, each on one bookie ({BK[0]}, {BK[2]}), no metadata names (15 entries, 42.9 KiB): "
            "reclaimable: nothing to do (compaction reclaims it)") in ps
    assert [(o["ledger"], o["verdict"], o["bookies"]) for o in s["orphan_ledgers"]] == [
        ("17", "metadata lost?", list(BK)), ("77", "reclaimable", [BK[0]]), ("78", "reclaimable", [BK[2]])]
    table = dom[dom.index('class="orphans"'):]
    table = table[:table.index("</table>")]
    assert "metadata lost?" in table and "bkdisk salvage" in table and "96.3 KiB" in table and "40.0 KiB" in table
    assert dom.index('id="worst-ledgers"') < dom.index('id="orphans"') < dom.index('id="charts"')
    assert 'data-chart="orphans"' in dom
    assert ">72.1 KiB</text>" in dom   # the chart of orphan bytes labels its bars in binary units
    assert 'id="space"' not in dom   # no space table: no section
    assert [p["text"] for p in probe["problems"]] == ps and probe["scrollWidth"] <= WIDTH


def test_the_terminal_summary_says_not_indexed_and_sizes_in_binary_units(pages):
    from bkdisk.audit.report import terminal_summary
    lines: list[str] = []
    terminal_summary(pages["unindexed"][0], lines.append)
    (bk2,) = [x for x in lines if x.strip().startswith(BK[1])]
    assert "missing     50 (not indexed 50)" in bk2 and "orphans        0 B" in bk2
    lines = []
    terminal_summary(pages["orphaned"][0], lines.append)
    (bk1,) = [x for x in lines if x.strip().startswith(BK[0])]
    assert "orphans   72.1 KiB" in bk1
    assert any("metadata lost?" in x for x in lines)
