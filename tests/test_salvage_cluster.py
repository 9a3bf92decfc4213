"""`bkdisk salvage` on golden cluster-3 with its metadata taken away (local Spark, in-process): for every
ledger the metadata BookKeeper wrote (or, for its OPEN and IN_RECOVERY ledgers, where recovery closes
them), each entry's write set position by position; with half the metadata given, no password
candidates, one disk missing, damaged and lost copies; a scoped ledger from the project's cluster
writer (golden has none); and bad input as one line, exit 8, nothing left beside --out."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import GOLDEN
from spark_session import shared_spark

from bkdisk.bookie.cluster import sample_cluster, write_cluster, write_set
from bkdisk.formats.metadata import parse_metadata, serialize_metadata
from bkdisk.metadata_cli import metadata
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.salvage_cli import salvage

pytestmark = pytest.mark.slow   # a local Spark salvage per test

C3 = GOLDEN / "cluster-3"
BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
MANIFEST = json.loads((C3 / "manifest.json").read_text())
LEDGERS = {lg["ledger_id_hex"]: lg for lg in MANIFEST["ledgers"]}
BKDISK = os.path.join(os.path.dirname(sys.executable), "bkdisk")


@pytest.fixture(scope="module", autouse=True)
def spark():
    return shared_spark()   # the command leaves a session it did not start running


def run(args: list[str], out: Path) -> tuple[int, str]:
    r = CliRunner().invoke(salvage, [*args, "--out", str(out), "-q"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


def candidates(tmp_path: Path) -> Path:
    f = tmp_path / "pw.txt"
    f.write_text("".join(bytes.fromhex(lg["password_hex"]).decode() + "\n" for lg in MANIFEST["ledgers"]
                         if lg["password_hex"]))
    return f


def disks(root: Path = C3, only: tuple[str, ...] = BOOKIES) -> list[str]:
    return [str(root / "bookies" / b) for b in only]


def written(out: Path) -> dict[str, object]:
    """The metadata files salvage wrote (each with its ledger's password: the owner's alone)."""
    files = sorted((out / "metadata").glob("*.bin"))
    assert {oct(p.stat().st_mode & 0o777) for p in [out / "metadata", *files]} <= {"0o700", "0o600"}
    return {p.name[:-4]: parse_metadata(p.read_bytes()) for p in files}


def ledger_rows(out: Path) -> dict[str, dict]:
    return {r["ledger"]: r for r in pq.read_table(out / "ledgers").to_pylist()}


def assert_is_bookkeepers(name: str, md, row: dict) -> None:
    """E, Qw, digest, password, last entry, length and CLOSED as the real metadata (the manifest's true
    last entry and length: recovery's close of an OPEN or IN_RECOVERY ledger), and each entry's write set."""
    lg = LEDGERS[name]
    assert (md.ensemble_size, md.write_quorum, md.digest_type, md.password, md.last_entry_id, md.length,
            md.state) == (lg["ensemble_size"], lg["write_quorum_size"], lg["digest_type"],
                          bytes.fromhex(lg["password_hex"]), lg["last_entry_id"], lg["length"], "CLOSED"), name
    assert md.ensemble_size >= md.write_quorum >= md.ack_quorum and md.ctime is None
    assert serialize_metadata(md) == (Path(row["_out"]) / "metadata" / f"{name}.bin").read_bytes()
    for r in (r for r in MANIFEST["entries"] if r["ledger_id"] == lg["ledger_id"]):
        got = [md.ensemble_at(r["entry_id"])[p] for p in
               [(r["entry_id"] + i) % md.ensemble_size for i in range(md.write_quorum)]]
        if md.write_quorum < md.ensemble_size:
            assert got == r["write_set"], (name, r["entry_id"])
        else:   # every entry on every position: the order is on no disk, and the row says so
            assert set(got) == set(r["write_set"]) and row["ensembles_confidence"] == "assumed"


@pytest.mark.parametrize("bucket_copies", [None, 1], ids=["one-bucket", "a-bucket-a-copy"])
def test_every_golden_ledger_is_rebuilt_as_bookkeeper_wrote_it(tmp_path, monkeypatch, bucket_copies):
    """Also with as many buckets as copies: a ledger's copies and keys still meet in one bucket."""
    if bucket_copies is not None:
        monkeypatch.setattr("bkdisk.audit.salvage_job.BUCKET_COPIES", bucket_copies)
    out = tmp_path / "out"
    code, _ = run([*disks(), "--password-candidates", str(candidates(tmp_path)), "--expect-bookies", "3"], out)
    assert code == 0
    got, rows = written(out), ledger_rows(out)
    assert sorted(got) == sorted(LEDGERS) and sorted(rows) == sorted(LEDGERS)
    for name, md in got.items():
        assert_is_bookkeepers(name, md, dict(rows[name], _out=str(out)))
        assert rows[name]["password_confidence"] == "certain" and rows[name]["ack_quorum_confidence"] == "assumed"
        assert rows[name]["lost_entries"] == [] and rows[name]["under_replicated"] == []
        if md.digest_type in ("CRC32", "CRC32C", "HMAC"):   # HMAC: verified with the password matched
            assert rows[name]["digest_type_confidence"] == "certain", rows[name]["digest_type_why"]
    assert "copies verified as HMAC" in rows["abcdef"]["digest_type_why"]
    assert "confirmed by the HMAC of" in rows["1000"]["password_why"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["ledgers_found"], summary["metadata_written"], summary["exit_code"]) == (6, 6, 0)
    # `bkdisk metadata import` takes the folder as it is
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store)
    try:
        r = CliRunner().invoke(metadata, ["import", str(out / "metadata"), "--server", f"127.0.0.1:{port}"])
        assert r.exit_code == 0, r.output
        c = MetadataClient(f"127.0.0.1:{port}")
        for name in LEDGERS:
            assert c.read(int(name, 16)).serialized == (out / "metadata" / f"{name}.bin").read_bytes()
        c.close()
    finally:
        server.stop(0)
        store.close()
    assert "bkdisk salvage" in (out / "report.html").read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_with_half_the_metadata_given_only_the_other_half_is_written(tmp_path):
    given = tmp_path / "md"
    given.mkdir()
    for name in ("10", "11", "1000"):
        shutil.copy(C3 / "metadata" / f"{name}.bin", given)
    out = tmp_path / "out"
    code, _ = run([*disks(), "--metadata-dir", str(given), "--password-candidates", str(candidates(tmp_path))], out)
    assert code == 0
    assert sorted(written(out)) == ["100000000", "2a", "abcdef"]
    rows = ledger_rows(out)
    for name, md in written(out).items():
        assert_is_bookkeepers(name, md, dict(rows[name], _out=str(out)))


def test_without_candidates_only_empty_password_ledgers_are_written(tmp_path):
    out = tmp_path / "out"
    code, _ = run(disks(), out)
    assert code == 4
    assert sorted(written(out)) == ["2a"]   # DUMMY, empty password
    for name, r in ledger_rows(out).items():
        if name != "2a":
            assert not r["metadata_written"] and r["password_found"] is False
            assert LEDGERS[name]["master_key_hex"] in r["no_metadata_because"]
            assert "add candidates" in r["no_metadata_because"]


def test_with_one_disk_missing_its_positions_are_reported_never_invented(tmp_path):
    """bk-2's disk bound to a host this run has no executor on: not read, as if missing. No metadata is
    written (a ledger with copies there would be closed short, or placed without bk-2, whose copies its
    garbage collection may then drop), nor imported; each ledger's row says what the disks read tell,
    bk-2's positions unknown. A disk given under another bookie's name is refused before Spark starts."""
    listed = tmp_path / "disks.tsv"
    wrong = tmp_path / "wrong.tsv"
    wrong.write_text("".join(f"{b}\t{p}\n" for b, p in zip(("bk-1.rack-a", "bk-9.rack-z", "bk-3.rack-b"), disks())))
    r = CliRunner().invoke(salvage, ["--disks-file", str(wrong), "--out", str(tmp_path / "w"), "-q"])
    assert r.exit_code == 8 and "given as bookie bk-9.rack-z, but its cookie names bk-2.rack-a" in r.output, r.output
    listed.write_text("".join(f"{b}\t{p}{host}\n" for b, p, host in zip(BOOKIES, disks(),
                                                                        ("", "\tnowhere.invalid", ""))))
    out = tmp_path / "out"
    code, _ = run(["--disks-file", str(listed), "--password-candidates", str(candidates(tmp_path)),
                   "--import", "grpc://127.0.0.1:1"], out)
    assert code == 4
    summary = json.loads((out / "summary.json").read_text())
    assert summary["disks_not_read"] == 1 and summary["metadata_written"] == 0
    assert [d["status"] for d in summary["disks"] if d["bookie_id"] == "bk-2.rack-a"] == ["not_audited"]
    assert written(out) == {} and not (out / "import.json").exists()
    rows = ledger_rows(out)
    for name, lg in LEDGERS.items():
        pinned = lg["write_quorum_size"] < lg["ensemble_size"] or len(lg["ensembles"]) > 1
        assert not rows[name]["metadata_written"]
        if not pinned and rows[name]["password_found"]:
            assert "1 of the disks given not read" in rows[name]["no_metadata_because"], rows[name]
        if pinned:
            assert "no read disk holds its copies" in rows[name]["no_metadata_because"]
            for e in json.loads(rows[name]["ensembles"]):
                truth = next(x["bookies"] for x in lg["ensembles"] if x["first_entry_id"] == e["first_entry_id"])
                assert e["bookies"] == [b if b != "bk-2.rack-a" else None for b in truth]


def _damage(root: Path, bookie: str, ledger_hex: str, entry: int) -> None:
    """Flip a payload byte of ``entry``'s copy on ``bookie`` (its digest then fails)."""
    man = json.loads((root / "bookies" / bookie / "manifest.json").read_text())
    lid = str(int(ledger_hex, 16))
    rec = next(r for r in man["entry_log_records"] if r["ledger_id"] == lid and r["entry_id"] == entry)
    log = root / "bookies" / bookie / rec["ledger_dir"] / "current" / rec["entry_log_file"]
    data = bytearray(log.read_bytes())
    data[rec["offset"] + rec["size"] + 4 - 1] ^= 0x40    # the payload's last byte
    log.write_bytes(bytes(data))


def test_damaged_and_lost_copies(tmp_path):
    root = tmp_path / "c3"
    shutil.copytree(C3 / "bookies", root / "bookies")
    shutil.copy(C3 / "manifest.json", root)
    # one copy of 0x11 entry 5 (CRC32C, Qw 3): the ledger as it was, the entry under-replicated
    _damage(root, "bk-1.rack-a", "11", 5)
    # every copy of 0x10 entry 59 (CRC32, its last): recovery reads it, every copy fails its digest, and a read
    # error other than "no such entry" fails the recovery (LedgerRecoveryOp.onEntryComplete): no metadata
    for b in next(r for r in MANIFEST["entries"] if r["ledger_id"] == "16" and r["entry_id"] == 59)["bookies"]:
        _damage(root, b, "10", 59)
    # every copy of 0x100000000 entry 10 (CRC32C): entry 11 carries LAC 10, so it closes at 49 with 10 lost
    for b in next(r for r in MANIFEST["entries"] if r["ledger_id"] == str(1 << 32) and r["entry_id"] == 10)["bookies"]:
        _damage(root, b, "100000000", 10)
    out = tmp_path / "out"
    code, _ = run([*disks(root), "--password-candidates", str(candidates(tmp_path))], out)
    assert code == 4
    got, rows = written(out), ledger_rows(out)
    assert_is_bookkeepers("11", got["11"], dict(rows["11"], _out=str(out)))
    assert rows["11"]["under_replicated"] == [5] and rows["11"]["lost_entries"] == []
    assert "10" not in got and not rows["10"]["metadata_written"]
    holders = ", ".join(sorted(next(r for r in MANIFEST["entries"] if r["ledger_id"] == "16" and r["entry_id"] == 59)
                               ["bookies"]))
    assert rows["10"]["no_metadata_because"] == (
        f"entry 59 has copies ({holders}) and none is intact: BookKeeper's recovery fails on that read, it does "
        "not close the ledger before it (1 entry from it on would be left out)")
    assert rows["10"]["dropped_entries"] == [59] and "entry 59 has no intact copy" in rows["10"]["last_entry_id_why"]
    assert got["100000000"].last_entry_id == 49 and rows["100000000"]["lost_entries"] == [10]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["entries_lost"], summary["entries_dropped"], summary["under_replicated_entries"]) == (1, 1, 1)


def test_a_scoped_ledger_is_written_under_its_qualified_name(tmp_path):
    # golden has no BP-35 ledger: a cluster from the project's writer, scoped ledgers among them
    spec = sample_cluster(bookies=4, ledgers=6, entries=20)
    cl = write_cluster(spec, str(tmp_path / "cl"))
    pw = tmp_path / "pw.txt"
    pw.write_text("".join(f"pw-{k}\n" for k in range(6)))
    out = tmp_path / "out"
    code, _ = run([*cl.bookie_roots.values(), "--password-candidates", str(pw)], out)
    assert code == 0
    got = written(out)
    scoped = [lg for lg in spec.ledgers if lg.scope_id]
    assert scoped
    for lg in spec.ledgers:
        name = f"{lg.ledger_id:x}" if lg.scope_id == 0 else lg.lid.qualified_name
        assert len(name) == 32 or lg.scope_id == 0
        md = got[name]
        assert (md.write_quorum, md.digest_type, md.password, md.last_entry_id, md.length) == (
            lg.write_quorum, lg.digest_type.name, lg.password, len(lg.payloads) - 1, sum(map(len, lg.payloads)))
        for e in range(len(lg.payloads)):
            ws = [md.ensemble_at(e)[(e + i) % md.ensemble_size] for i in range(md.write_quorum)]
            truth = write_set(lg.ensembles, lg.write_quorum, e)
            assert set(ws) == set(truth)
            if lg.write_quorum < lg.ensemble_size and md.ensemble_size == lg.ensemble_size:
                assert ws == list(truth), (name, e)


def test_fewer_bookies_read_than_expected_write_no_metadata(tmp_path):
    """Two of the three bookies: ledger 0x11 (E 3, Qw 3: every entry on every bookie) fits copies on bk-1 and
    bk-2 alone, as E 2, Qw 2, with nothing missing: metadata that would leave bk-3's copies out. --expect-bookies
    3 writes no metadata and says why in the rows that would have had it; the summary names the bookies read."""
    out = tmp_path / "out"
    code, _ = run([*disks(only=BOOKIES[:2]), "--password-candidates", str(candidates(tmp_path)),
                   "--expect-bookies", "3"], out)
    assert code == 4
    assert list((out / "metadata").iterdir()) == []
    rows = ledger_rows(out)
    assert sorted(rows) == sorted(LEDGERS)
    assert all(not r["metadata_written"] for r in rows.values())
    assert rows["11"]["no_metadata_because"] == (
        "disks of 2 bookies read, --expect-bookies 3: a ledger whose other bookies' disks were not read could be "
        "closed short or placed on these only")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["bookies_read"], summary["bookies_expected"], summary["metadata_written"]) == (
        list(BOOKIES[:2]), 3, 0)


def test_entries_only_in_a_journal_after_lastmark_make_their_disk_not_read(tmp_path):
    """A crash before the flush: entries 46-49 of 0x100000000 cut from bk-2's and bk-3's entry log (and bk-3's
    index never got them), lastMark back before their journal records. They were acknowledged, and a restart
    replays them; a salvage closing the ledger at 45 would lose them, so bk-3's disk (REPLAY_NOT_IN_STORAGE)
    counts as not read and no metadata is written."""
    root = tmp_path / "c3"
    shutil.copytree(C3, root, symlinks=True)
    for b, cut, journal_at in (("bk-2.rack-a", 293918, 539648), ("bk-3.rack-b", 192889, 535040)):
        os.truncate(root / "bookies" / b / "ledgers" / "current" / "1.log", cut)
        mark = root / "bookies" / b / "ledgers" / "current" / "lastMark"
        data = mark.read_bytes()
        mark.write_bytes(data[:8] + journal_at.to_bytes(8, "big"))
    out = tmp_path / "out"
    code, _ = run([*disks(root), "--password-candidates", str(candidates(tmp_path)), "--expect-bookies", "3"], out)
    assert code == 4 and list((out / "metadata").iterdir()) == []
    summary = json.loads((out / "summary.json").read_text())
    [bk3] = [d for d in summary["disks"] if d["bookie_id"] == BOOKIES[2]]
    assert bk3["status"] == "partly_read" and bk3["error"].startswith(
        "its journal holds entries its ledger storage lacks yet (start the bookie once, so that its journal's "
        "replay writes them, then salvage again): REPLAY_NOT_IN_STORAGE ledger 4294967296 entry 46 "), bk3


def test_copies_no_index_holds_are_not_served_copies(tmp_path):
    """0x10's index gone on bk-1 and bk-2 (a lost index, or a ledger deleted since): BookKeeper reads a copy
    through its bookie's index only, so the entries whose write set is {bk-1, bk-2} have no copy it serves
    (no metadata, and the reason says how to get them back); those with bk-3 are under-replicated."""
    root = tmp_path / "c3"
    shutil.copytree(C3, root, symlinks=True)
    for b in BOOKIES[:2]:
        for idx in (root / "bookies" / b).glob("*/current/*/*/10.idx"):
            idx.unlink()
    out = tmp_path / "out"
    code, _ = run([*disks(root), "--password-candidates", str(candidates(tmp_path)), "--expect-bookies", "3"], out)
    assert code == 4
    rows = ledger_rows(out)
    both = sorted(e["entry_id"] for e in MANIFEST["entries"] if e["ledger_id"] == "16" and set(e["bookies"]) ==
                  set(BOOKIES[:2]))
    assert not rows["10"]["metadata_written"] and rows["10"]["no_metadata_because"] == (
        f"{len(both)} entries (entry {both[0]} first) have intact copies only where their bookie's index does not "
        f"hold them ({', '.join(BOOKIES[:2])}): BookKeeper reads none of them (rebuild the index with bookie-fsck "
        "--repair, then salvage again; or the ledger was deleted since)")
    assert rows["10"]["under_replicated"] == sorted(e["entry_id"] for e in MANIFEST["entries"]
                                                    if e["ledger_id"] == "16" and BOOKIES[2] in e["bookies"])
    assert rows["11"]["metadata_written"] and rows["11"]["under_replicated"] == []


def test_a_ledger_placed_on_a_bookie_not_given_withholds_every_ledgers_metadata(tmp_path):
    """bk-3 not given, no --expect-bookies: ledgers whose ensembles show a position no disk read holds prove
    a bookie missing, so 0x11 (E 3, Qw 3: every entry on every bookie, which fits bk-1 and bk-2 alone as E 2)
    is not written either: metadata/ is imported as a whole."""
    out = tmp_path / "out"
    code, _ = run([*disks(only=BOOKIES[:2]), "--password-candidates", str(candidates(tmp_path))], out)
    assert code == 4
    assert list((out / "metadata").iterdir()) == []
    rows = ledger_rows(out)
    assert not rows["11"]["metadata_written"]
    assert rows["11"]["no_metadata_because"].startswith("ledger ") and rows["11"]["no_metadata_because"].endswith(
        " was written to a bookie whose disk was not read (an ensemble position no disk read shows): a ledger placed "
        "on the disks read alone could lack it too (give every bookie's disk)"), rows["11"]


def test_a_disk_whose_ledger_dir_is_empty_is_a_disk_not_read(tmp_path):
    """bk-3's ledger dir emptied (a disk not mounted under it): its check says LAYOUT_NO_CURRENT. Its copies
    are not all the disk holds, so it counts as a disk not read, even with --expect-bookies 3 met by the
    bookie ids: ledger 0x11 (E 3, Qw 3) would otherwise be written E 2 on bk-1 and bk-2."""
    root = tmp_path / "c3"
    shutil.copytree(C3, root, symlinks=True)
    for p in (root / "bookies" / BOOKIES[2] / "ledgers").iterdir():
        shutil.rmtree(p)
    out = tmp_path / "out"
    code, _ = run([*disks(root), "--password-candidates", str(candidates(tmp_path)), "--expect-bookies", "3"], out)
    assert code == 4
    assert list((out / "metadata").iterdir()) == []
    summary = json.loads((out / "summary.json").read_text())
    [bk3] = [d for d in summary["disks"] if d["bookie_id"] == BOOKIES[2]]
    assert bk3["status"] == "partly_read" and bk3["error"].startswith(
        "some of its storage could not be read: LAYOUT_NO_CURRENT expected a 'current' folder in "), bk3
    assert not ledger_rows(out)["11"]["metadata_written"]


def test_a_log_cut_mid_entry_on_one_bookie_leaves_its_ensembles_and_under_replicates_what_it_lost(tmp_path):
    """bk-1's 0.log cut inside an entry: the copies past the cut are gone from bk-1 alone. Its index still
    holds them (INDEX_LOCATION_OUT_OF_RANGE): damaged copies of bk-1's, not an ensemble change to a bookie no
    disk shows (which withheld every ledger's metadata, blamed on a missing disk). Each ledger is written as
    BookKeeper wrote it, and the entries whose bk-1 copy went are under-replicated."""
    root = tmp_path / "c3"
    shutil.copytree(C3, root, symlinks=True)
    log = root / "bookies" / BOOKIES[0] / "ledgers0" / "current" / "0.log"
    os.truncate(log, 100013)
    out = tmp_path / "out"
    code, _ = run([*disks(root), "--password-candidates", str(candidates(tmp_path)), "--expect-bookies", "3"], out)
    assert code == 0   # (every ledger written, no entry lost: under-replicated copies are the summary's to say)
    man = json.loads((root / "bookies" / BOOKIES[0] / "manifest.json").read_text())
    cut = {(int(r["ledger_id"]), r["entry_id"]) for r in man["entry_log_records"]
           if r["entry_log_file"] == "0.log" and r["ledger_dir"] == "ledgers0" and r["offset"] + r["size"] + 4 > 100013}
    assert cut
    got, rows = written(out), ledger_rows(out)
    for name, lg in LEDGERS.items():
        lost_here = sorted(e for lid, e in cut if lid == int(lg["ledger_id"]))
        if lost_here:
            assert rows[name]["under_replicated"] == lost_here, name
        if name in got:
            assert_is_bookkeepers(name, got[name], dict(rows[name], _out=str(out)))
    hit = {lid for lid, _e in cut}
    assert {n for n, r in rows.items() if r["under_replicated"]} == {n for n, lg in LEDGERS.items()
                                                                      if int(lg["ledger_id"]) in hit}
    assert len(got) == len(rows) == len(LEDGERS)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["under_replicated_entries"] == len(cut) and summary["entries_lost"] == 0


def test_more_bookies_read_than_expected_write_no_metadata(tmp_path):
    """Three bookies read, --expect-bookies 2: a disk of another cluster among them (its cookie's instance id
    not told, as a scan file's is not) would join its ledgers to this one's of the same ids."""
    out = tmp_path / "out"
    code, _ = run([*disks(), "--password-candidates", str(candidates(tmp_path)), "--expect-bookies", "2"], out)
    assert code == 4 and list((out / "metadata").iterdir()) == []
    assert ledger_rows(out)["10"]["no_metadata_because"] == (
        "disks of 3 bookies read, --expect-bookies 2: disks of another cluster among them would join its ledgers "
        "to this one's of the same ids")


def test_a_nightly_scan_file_beside_disks_rebuilds_the_same(tmp_path):
    """A scan-disk file of a scrub's run after a deep one (its logs walked light: payload hashes kept short)
    with the other two disks read here: copies agree on their hashes' common prefix, every ledger is rebuilt."""
    bk1 = disks(only=BOOKIES[:1])[0]
    for night, deep in ((0, ["--deep-all"]), (1, [])):
        p = subprocess.run([BKDISK, "scan-disk", bk1, "--out", str(tmp_path / f"night{night}.parquet"),
                            "--state", str(tmp_path / "state"), "--as-of", f"2026-11-0{night + 1}T00:00:00Z", *deep],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
    hashes = pq.read_table(tmp_path / "night1.parquet", columns=["payload_sha256"]).column(0).to_pylist()
    assert 16 in {len(h) for h in hashes if h}   # the light walk's short hashes, which the test is about
    out = tmp_path / "out"
    code, output = run([*disks(only=BOOKIES[1:]), "--scan-files", str(tmp_path / "night1.parquet"),
                        "--password-candidates", str(candidates(tmp_path))], out)
    assert code == 0, output
    assert sorted(written(out)) == sorted(LEDGERS)


@pytest.mark.parametrize("case", ["not_a_bookie", "scan_file", "candidates", "out"])
def test_bad_input_is_one_line_exit_8_and_nothing_left(tmp_path, case):
    parent = tmp_path / "p"
    parent.mkdir()
    out = parent / "out"
    args = disks()
    if case == "not_a_bookie":
        (tmp_path / "nb").mkdir()
        (tmp_path / "nb" / "x").write_text("x")
        args = [*args, str(tmp_path / "nb")]
        expect = "not a bookie disk: "
    elif case == "scan_file":
        other = tmp_path / "other.parquet"   # another run's output (salvage's ledgers table), not a scan
        pq.write_table(pa.table({"ledger": ["10"], "metadata_written": [True]}), other)
        args = [*args, "--scan-files", str(other)]
        expect = "not a bkdisk scan-disk file"
    elif case == "candidates":
        bad = tmp_path / "pw.bin"
        bad.write_bytes(b"pw\x00\xff")
        args = [*args, "--password-candidates", str(bad)]
        expect = "expected a text file of passwords"
    else:   # (the tests may run as root, whom no permission stops: the parent is a file)
        (parent / "f").write_text("")
        out = parent / "f" / "out"
        expect = "cannot write the output folder's parent"
    code, output = run(args, out)
    lines = [x for x in output.splitlines() if x.strip()]
    assert code == 8 and len(lines) == 1 and expect in lines[0], output
    assert os.listdir(parent) == ([] if case != "out" else ["f"])


def test_spark_submit_of_the_application_file_salvages_the_same(tmp_path):
    import subprocess
    import sys

    import bkdisk.salvage_app
    bin_dir = Path(sys.executable).parent
    out = tmp_path / "out"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    p = subprocess.run([str(bin_dir / "spark-submit"), "--master", "local[2]", bkdisk.salvage_app.__file__, *disks(),
                        "--password-candidates", str(candidates(tmp_path)), "--out", str(out), "-q"],
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    assert sorted(written(out)) == sorted(LEDGERS)
    for name, md in written(out).items():
        assert_is_bookkeepers(name, md, dict(ledger_rows(out)[name], _out=str(out)))
