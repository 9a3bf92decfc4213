"""read-ledger over an ``.idx`` cut at a slot boundary (a whole header and fewer whole slots: an index of fewer
entries to look at): where the metadata places the ids no disk's index holds on a disk, that disk's entry
logs are searched for them, said in one warning; where every id is held somewhere, nothing is scanned."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLDEN
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie import ledger_copies, ledger_read, unindexed_copies
from bkdisk.bookie.ledger_copies import open_disk
from bkdisk.bookie.metadata_dir import read_ledger_file
from bkdisk.bookie.salvage_placement import write_set
from bkdisk.formats import index as fi
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.formats.paths import CURRENT_DIR, index_relpath
from bkdisk.read_ledger import read_ledger_command

CLUSTER = GOLDEN / "cluster-3"
MANIFEST = json.loads((CLUSTER / "manifest.json").read_text())
BOOKIES = [b["bookie_id"] for b in MANIFEST["bookies"]]
KEPT_SLOTS = 10


@pytest.fixture
def cut(tmp_path: Path) -> Path:
    """The golden cluster with bk-1's index of ledger 16 (E=3, Qw=2: bk-1 holds ids 0, 2 mod 3) cut to
    its header and its first KEPT_SLOTS slots."""
    root = tmp_path / "cluster-3"
    shutil.copytree(CLUSTER, root, symlinks=True)
    disk = root / "bookies" / BOOKIES[0]
    (idx,) = [p for d in disk.iterdir() if (p := d / CURRENT_DIR / index_relpath(LedgerId(0, 16))).exists()]
    assert os.path.getsize(idx) > fi.HEADER_SIZE + KEPT_SLOTS * fi.SLOT_SIZE
    os.truncate(idx, fi.HEADER_SIZE + KEPT_SLOTS * fi.SLOT_SIZE)
    return root


def _wanted(lid: str) -> dict[int, dict]:
    return {e["entry_id"]: e for e in MANIFEST["entries"] if e["ledger_id"] == lid}


def test_the_entries_a_cut_index_lost_are_found_in_the_logs_where_the_metadata_places_them(cut: Path):
    disk = cut / "bookies" / BOOKIES[0]
    res = CliRunner().invoke(read_ledger_command, ["--ledger-id", "16", str(disk), "--metadata-dir",
                                                   str(cut / "metadata"), "--jsonl"])
    assert res.exit_code == 4, res.stderr   # (the ids placed on the other bookies only have no copy here)
    got = [json.loads(line) for line in res.stdout.splitlines()]
    want = _wanted("16")
    held = {e for e, w in want.items() if BOOKIES[0] in w["bookies"]}
    assert any(e >= KEPT_SLOTS for e in held)
    assert [o["entry_id"] for o in got] == list(range(60))
    assert {o["entry_id"] for o in got if not o["lost"]} == held
    assert all(o["payload_sha256"] == want[o["entry_id"]]["payload_sha256"] for o in got if not o["lost"])
    warnings = [line for line in res.stderr.splitlines() if "warning" in line]
    assert warnings == [f"bkdisk: warning: {disk}: entries the metadata places on this disk are in no disk's index, "
                        f"from entry {KEPT_SLOTS} on (an index cut short?): its entry logs were searched for them"]


def test_ids_another_disk_holds_are_read_from_it_and_no_log_is_scanned(cut: Path, monkeypatch):
    def no_scan(*a, **kw):
        raise AssertionError("an entry log was scanned")
    monkeypatch.setattr(ledger_copies, "scan_entry_log", no_scan)
    disks = [open_disk(str(cut / "bookies" / b)) for b in BOOKIES]
    md = read_ledger_file(str(cut / "metadata"), LedgerId(0, 16))
    done = ledger_read.LedgerRead()
    got = list(ledger_read.read_ledger(disks, LedgerId(0, 16), md, done=done))
    assert [e.entry_id for e in got] == list(range(60)) and not any(e.lost for e in got)
    assert done.searched == [] and done.scanned == []


def test_without_metadata_nothing_tells_a_cut_index_and_nothing_is_scanned(cut: Path, monkeypatch):
    monkeypatch.setattr(ledger_copies, "scan_entry_log", lambda *a, **kw: pytest.fail("an entry log was scanned"))
    disk = open_disk(str(cut / "bookies" / BOOKIES[0]))
    got = list(ledger_read.read_ledger([disk], LedgerId(0, 16), None))
    assert [e.entry_id for e in got if not e.lost] == [e for e in range(KEPT_SLOTS) if e % 3 != 1]


def _metadata(firsts: list[int], size: int, quorum: int, members: list[list[str]]) -> LedgerMetadata:
    return LedgerMetadata(format_version=3, ensemble_size=size, write_quorum=quorum, ack_quorum=quorum, length=0,
                          last_entry_id=-1,
                          state="OPEN", ensembles=tuple((f, tuple(m)) for f, m in zip(firsts, members)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_disks_marked_are_those_the_round_robin_gives_an_id_of_the_gap(data):
    size = data.draw(st.integers(1, 5))
    quorum = data.draw(st.integers(1, size))
    names = [f"b{i}" for i in range(7)]
    segments = data.draw(st.integers(1, 3))
    firsts = sorted(set([0] + data.draw(st.lists(st.integers(1, 40), max_size=segments - 1))))
    members = [data.draw(st.lists(st.sampled_from(names), min_size=size, max_size=size)) for _ in firsts]
    md = _metadata(firsts, size, quorum, members)
    a = data.draw(st.integers(0, 50))
    b = data.draw(st.integers(a, a + 12))
    bookies = {n: names[n] for n in data.draw(st.sets(st.integers(0, 6), min_size=1))}
    out = unindexed_copies.placed_disks(bookies, md, a, b)
    want: dict[int, list[int]] = {}
    for e in range(a, b + 1):
        ens = md.ensemble_at(e)
        placed = {ens[i] for i in write_set(e, len(ens), quorum)}
        for n, name in bookies.items():
            if name in placed:
                want.setdefault(n, []).append(e)
    assert set(out) == set(want)
    for n, (lo, hi) in out.items():   # the range said spans the ids placed there, within the gap
        assert a <= lo <= min(want[n]) and max(want[n]) <= hi <= b


def test_past_an_open_ledgers_last_id_held_nothing_is_searched(cut: Path, monkeypatch):
    """An open ledger read --to past its last entry: those ids need never have been written."""
    import dataclasses
    monkeypatch.setattr(ledger_copies, "scan_entry_log", lambda *a, **kw: pytest.fail("an entry log was scanned"))
    disks = [open_disk(str(cut / "bookies" / b)) for b in BOOKIES]
    md = dataclasses.replace(read_ledger_file(str(cut / "metadata"), LedgerId(0, 16)), state="OPEN")
    done = ledger_read.LedgerRead()
    got = list(ledger_read.read_ledger(disks, LedgerId(0, 16), md, 50, 80, done))
    assert [e.entry_id for e in got if not e.lost] == list(range(50, 60)) and done.searched == []
