"""bkdisk read-ledger: every entry of a ledger from any intact copy, through each disk's own index,
on the golden cluster BookKeeper 4.16.6 wrote (one .idx bookie of each kind and one DbLedgerStorage)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLDEN

from bkdisk.bookie import ledger_copies
from bkdisk.bookie.ledger_copies import open_disk
from bkdisk.bookie.ledger_read import read_ledger
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, entry_log_name, index_relpath
from bkdisk.indexfiles.reference_reader import read_index
from bkdisk.read_ledger import read_ledger_command
from bkdisk.rocksdbfiles.dbindex import read_locations

CLUSTER = GOLDEN / "cluster-3"
MANIFEST = json.loads((CLUSTER / "manifest.json").read_text())
BOOKIES = [b["bookie_id"] for b in MANIFEST["bookies"]]


def _disks(root: Path) -> list[str]:
    return [str(root / "bookies" / b) for b in BOOKIES]


def _run(args: list[str]):
    return CliRunner().invoke(read_ledger_command, [str(a) for a in args])


def _lines(res) -> list[dict]:
    return [json.loads(line) for line in res.stdout.splitlines()]


def _wanted(lid: str) -> dict[int, dict]:
    return {e["entry_id"]: e for e in MANIFEST["entries"] if e["ledger_id"] == lid}


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """A writable copy of the golden cluster: damage it there."""
    root = tmp_path / "cluster-3"
    shutil.copytree(CLUSTER, root, symlinks=True)
    return root


def _copy_at(root: Path, bookie: str, lid: int, eid: int) -> tuple[Path, int]:
    """(entry log, position just past the size prefix) of a stored copy, from the bookie's index as
    the reference readers read it."""
    disk = root / "bookies" / bookie
    dirs = sorted(p for p in disk.iterdir() if p.name.startswith("ledgers"))
    for d in dirs:
        idx = d / CURRENT_DIR / index_relpath(LedgerId(0, lid))
        if idx.exists():
            loc = int(read_index(idx).locations[eid])
            log, pos = loc >> 32, loc & 0xFFFFFFFF
            break
        db = d / CURRENT_DIR / "locations"
        if db.is_dir():
            with ExitStack() as stack:
                locs, _problems = read_locations(db, stack)
            (hit,) = [x for x in locs if (x.ledger_id, x.entry_id) == (lid, eid)]
            log, pos = hit.log_id, hit.offset
            break
    else:
        raise AssertionError(f"{bookie} holds no index of ledger {lid}")
    (path,) = [p for d in dirs if (p := d / CURRENT_DIR / entry_log_name(log)).exists()]
    return path, pos


def _damage_payload(root: Path, bookie: str, lid: int, eid: int) -> None:
    path, pos = _copy_at(root, bookie, lid, eid)
    with open(path, "r+b") as f:
        f.seek(pos - 4)
        size = int.from_bytes(f.read(4), "big")
        f.seek(pos + size - 1)           # the payload's last byte
        b = f.read(1)
        f.seek(pos + size - 1)
        f.write(bytes([b[0] ^ 0xFF]))


@pytest.mark.parametrize("ledger", MANIFEST["ledgers"], ids=lambda l: l["ledger_id"])
def test_every_payload_equals_what_was_written_and_every_copy_is_named(ledger: dict):
    want = _wanted(ledger["ledger_id"])
    res = _run(["--ledger-id", ledger["ledger_id"], *_disks(CLUSTER), "--metadata-dir", CLUSTER / "metadata",
                "--jsonl"])
    assert res.exit_code == 0, res.stderr
    got = _lines(res)
    assert [o["entry_id"] for o in got] == sorted(want)
    for o in got:
        w = want[o["entry_id"]]
        assert o["lost"] is False and o["payload_sha256"] == w["payload_sha256"]
        assert len(__import__("base64").b64decode(o["payload_base64"])) == w["payload_length"]
        assert sorted(o["copies"]) == sorted(w["bookies"]) == sorted(o["intact_copies"])
        assert o["bookie"] in w["bookies"] and o["digest_type"] == w["digest_type"]
        # with the metadata's password HMAC verifies; a DUMMY entry carries no digest
        assert o["digest_verified"] is (w["digest_type"] != "DUMMY")
    assert res.stderr == ""


def test_without_metadata_hmac_and_dummy_copies_are_said_not_verified_and_crc_ones_are_verified():
    for ledger in MANIFEST["ledgers"]:
        res = _run(["--ledger-id", ledger["ledger_id"], *_disks(CLUSTER), "--jsonl"])
        assert res.exit_code == 0, res.stderr
        got = _lines(res)
        want = _wanted(ledger["ledger_id"])
        assert [o["payload_sha256"] for o in got] == [want[e]["payload_sha256"] for e in sorted(want)]
        assert {o["digest_verified"] for o in got} == {ledger["digest_type"] not in ("HMAC", "DUMMY")}


def test_a_damaged_copy_is_skipped_for_an_intact_one(cluster: Path):
    w = _wanted("16")[5]
    first = w["write_set"][0]
    _damage_payload(cluster, first, 16, 5)
    res = _run(["--ledger-id", "16", "--from", "5", "--to", "5", *_disks(cluster), "--jsonl"])
    assert res.exit_code == 0, res.stderr
    (o,) = _lines(res)
    assert o["payload_sha256"] == w["payload_sha256"] and o["digest_verified"] is True
    assert o["bookie"] == w["write_set"][1] and o["intact_copies"] == [w["write_set"][1]]
    assert sorted(o["copies"]) == sorted(w["write_set"])


def test_an_entry_whose_every_copy_is_damaged_is_lost_and_the_rest_still_read(cluster: Path):
    w = _wanted("17")[7]
    for b in w["bookies"]:
        _damage_payload(cluster, b, 17, 7)
    res = _run(["--ledger-id", "17", *_disks(cluster), "--metadata-dir", cluster / "metadata", "--jsonl"])
    assert res.exit_code == 4
    got = {o["entry_id"]: o for o in _lines(res)}
    assert len(got) == len(_wanted("17"))
    lost = got[7]
    assert lost["lost"] is True and lost["payload_base64"] is None and lost["payload_sha256"] is None
    assert lost["bookie"] is None and lost["intact_copies"] == [] and sorted(lost["copies"]) == sorted(w["bookies"])
    assert got[8]["payload_sha256"] == _wanted("17")[8]["payload_sha256"]
    assert res.stderr.strip() == f"bkdisk: 1 of {len(got)} entries lost (no intact copy)"


def test_entries_past_the_last_any_disk_holds_are_lost_up_to_the_metadatas_last_entry(cluster: Path):
    # One bookie only: the entries it does not hold have no copy at all.
    res = _run(["--ledger-id", "16", str(cluster / "bookies" / BOOKIES[0]), "--metadata-dir",
                cluster / "metadata", "--jsonl"])
    assert res.exit_code == 4
    got = _lines(res)
    assert [o["entry_id"] for o in got] == list(range(60))
    held = {e for e, w in _wanted("16").items() if BOOKIES[0] in w["bookies"]}
    assert {o["entry_id"] for o in got if not o["lost"]} == held
    assert all(o["copies"] == [] for o in got if o["lost"])


def test_a_range_past_a_closed_ledgers_last_entry_ends_at_that_entry(cluster: Path):
    """--to past the metadata's last entry (59, CLOSED): no entry of the ledger is there, none is printed
    (or counted lost); --to 2^63 - 1 ends there as well."""
    for to in ("70", str(2**63 - 1)):
        res = _run(["--ledger-id", "16", *_disks(cluster), "--metadata-dir", cluster / "metadata", "--jsonl",
                    "--from", "58", "--to", to])
        assert res.exit_code == 0, res.output
        assert [(o["entry_id"], o["lost"]) for o in _lines(res)] == [(58, False), (59, False)]


def test_an_index_grown_sparse_to_a_terabyte_is_read_over_its_data_only(tmp_path: Path):
    """An .idx file whose size damage made 1 TiB (a hole after its slots): read as the slots it holds,
    not mapped window by window to its end (which took hours), with or without the metadata's last entry."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root, symlinks=True)
    idx = root / "ledgers1" / CURRENT_DIR / index_relpath(LedgerId(0, 255))
    variants = ([], ["--metadata-dir", str(root / "metadata")])
    whole = [_run(["--ledger-id", "255", root, "--jsonl", *md]) for md in variants]
    os.truncate(idx, 1 << 40)
    for md, before in zip(variants, whole):
        cmd = [sys.executable, "-c", "from bkdisk.cli import main; main()", "read-ledger", "--ledger-id", "255",
               str(root), "--jsonl", *md]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert out.returncode == before.exit_code == 0, out.stderr
        assert out.stdout == before.stdout and len(_lines(before)) == 13


def test_an_index_that_cannot_be_read_is_said_and_its_logs_scanned(tmp_path: Path):
    """A DbLedgerStorage dir's locations database gone, a .idx dir's current/ a file: the disk's index is
    not known (every entry was said lost, without a word); its logs are scanned, and it is said."""
    db = tmp_path / "db"
    shutil.copytree(GOLDEN / "dbstorage-v6-bookieid", db, symlinks=True)
    whole = _run(["--ledger-id", "255", db, "--metadata-dir", db / "metadata"])
    shutil.rmtree(db / "ledgers1" / CURRENT_DIR / "locations")
    res = _run(["--ledger-id", "255", db, "--metadata-dir", db / "metadata"])
    assert res.exit_code == whole.exit_code == 0 and res.stdout == whole.stdout, res.output
    assert "locations: expected DbLedgerStorage's locations database, found none" in res.stderr
    idx = tmp_path / "idx"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", idx, symlinks=True)
    cur = idx / "ledgers1" / CURRENT_DIR
    shutil.rmtree(cur)
    cur.write_text("x")
    res = _run(["--ledger-id", "0", idx, "--metadata-dir", idx / "metadata", "--jsonl"])
    assert res.exit_code == 4 and f"{cur}: expected a folder of index files, found a file" in res.stderr
    assert [o["entry_id"] for o in _lines(res) if not o["lost"]] == [22]   # (in ledgers0's 2.log)


def test_a_dbledgerstorage_disk_is_read_through_its_locations_database():
    db = next(b for b in MANIFEST["bookies"] if b["storage_class"].endswith("DbLedgerStorage"))
    res = _run(["--ledger-id", "4294967296", str(CLUSTER / db["dir"]), "--jsonl"])
    want = _wanted("4294967296")
    got = {o["entry_id"]: o for o in _lines(res)}
    held = {e for e, w in want.items() if db["bookie_id"] in w["bookies"]}
    assert {e for e, o in got.items() if not o["lost"]} == held and held
    assert all(got[e]["payload_sha256"] == want[e]["payload_sha256"] for e in held)
    assert "scanned" not in res.stderr


def test_a_sound_index_is_never_bypassed_by_a_scan(monkeypatch):
    def no_scan(*a, **kw):
        raise AssertionError("an entry log was scanned")
    monkeypatch.setattr(ledger_copies, "scan_entry_log", no_scan)
    disks = [open_disk(d) for d in _disks(CLUSTER)]
    got = list(read_ledger(disks, LedgerId(0, 11259375), None))
    assert len(got) == len(_wanted("11259375")) and not any(e.lost for e in got)


def test_a_damaged_index_falls_back_to_a_scan_of_that_disk_and_says_so(cluster: Path):
    bookie = BOOKIES[0]
    disk = cluster / "bookies" / bookie
    (idx,) = [p for d in disk.iterdir() if (p := d / CURRENT_DIR / index_relpath(LedgerId(0, 16))).exists()]
    with open(idx, "r+b") as f:
        f.write(b"\xde\xad\xbe\xef")          # the header's magic
    res = _run(["--ledger-id", "16", *_disks(cluster), "--jsonl"])
    assert res.exit_code == 0, res.stderr
    (warning,) = res.stderr.splitlines()
    assert warning.startswith(f"bkdisk: warning: {disk}: the ledger's index is damaged") and str(idx) in warning
    assert warning.endswith("its entry logs were scanned instead")
    want = _wanted("16")
    got = _lines(res)
    assert [o["payload_sha256"] for o in got] == [want[e]["payload_sha256"] for e in sorted(want)]
    assert all(sorted(o["copies"]) == sorted(want[o["entry_id"]]["bookies"]) for o in got)


def test_memory_holds_a_chunk_not_the_ledger(monkeypatch):
    from bkdisk.bookie import ledger_read
    whole = list(read_ledger([open_disk(d) for d in _disks(CLUSTER)], LedgerId(0, 16), None))
    monkeypatch.setattr(ledger_read, "CHUNK_ENTRIES", 3)
    seen = []
    real = ledger_read._settle

    def settle(chunk, *a):
        seen.append(len(chunk))
        yield from real(chunk, *a)
    monkeypatch.setattr(ledger_read, "_settle", settle)
    chunked = list(read_ledger([open_disk(d) for d in _disks(CLUSTER)], LedgerId(0, 16), None))
    assert max(seen) <= 3 and sum(seen) == 60
    assert [e.to_json() for e in chunked] == [e.to_json() for e in whole]


def test_a_scoped_ledger_is_named_by_its_qualified_name(cluster: Path):
    res = _run(["--ledger-qualified-name", f"{0:016x}{16:016x}", *_disks(CLUSTER), "--to", "0", "--jsonl"])
    assert res.exit_code == 0 and _lines(res)[0]["payload_sha256"] == _wanted("16")[0]["payload_sha256"]


def test_a_disk_that_is_not_a_bookie_is_one_line_exit_8(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    res = _run(["--ledger-id", "16", str(CLUSTER / "bookies" / BOOKIES[0]), str(tmp_path / "empty"), "--jsonl"])
    assert res.exit_code == 8 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"bkdisk: {tmp_path / 'empty'}: not a bookie disk")


def test_a_ledger_no_disk_holds_and_no_metadata_names_is_one_line_exit_4():
    res = _run(["--ledger-id", "999", *_disks(CLUSTER), "--metadata-dir", CLUSTER / "metadata", "--jsonl"])
    assert res.exit_code == 4 and res.stdout == ""
    assert res.stderr.splitlines() == ["bkdisk: ledger 999: no disk given holds it and no metadata names it"]


def test_usage_errors_name_the_option():
    res = _run([*_disks(CLUSTER)])
    assert res.exit_code == 2 and "--ledger-id" in res.stderr
    res = _run(["--ledger-id", "16", "--from", "5", "--to", "4", *_disks(CLUSTER)])
    assert res.exit_code == 2 and "--to 4 is before --from 5" in res.stderr
    res = _run(["--ledger-id", "16"])
    assert res.exit_code == 2 and "DISK" in res.stderr


def test_the_installed_command_exits_16_on_usage_and_8_on_a_bad_disk_without_a_traceback(tmp_path: Path):
    script = Path(sys.executable).with_name("bkdisk")
    usage = subprocess.run([str(script), "read-ledger", "--ledger-id", "16"], capture_output=True, timeout=120)
    assert usage.returncode == 16 and b"Traceback" not in usage.stderr
    bad = subprocess.run([str(script), "read-ledger", "--ledger-id", "16", str(tmp_path), "--jsonl"],
                         capture_output=True, timeout=120)
    assert bad.returncode == 8 and len(bad.stderr.splitlines()) == 1 and bad.stdout == b""


def test_a_seek_to_a_ledgers_locations_gives_what_the_whole_database_holds_for_it():
    from bkdisk.formats.dbledger import LOCATIONS_KEY
    from bkdisk.formats.ids import to_signed64
    from bkdisk.rocksdbfiles.db import open_db
    db_dir = CLUSTER / "bookies" / BOOKIES[2] / "ledgers" / CURRENT_DIR / "locations"
    with ExitStack() as stack:
        db = open_db(db_dir, stack)
        every = list(db.items())
        for ledger in [*(int(x["ledger_id"]) for x in MANIFEST["ledgers"]), 0, 5, (1 << 64) - 1]:
            prefix = LOCATIONS_KEY.build(dict(ledger_id=to_signed64(ledger), entry_id=0))[:8]
            assert list(db.items_with_prefix(prefix)) == [kv for kv in every if kv[0].startswith(prefix)]


def test_the_metadata_service_gives_the_last_entry_digest_and_password(tmp_path: Path):
    from metaservice_fixture import served

    from bkdisk.metaservice.sqlite_store import SqliteStore
    with served(SqliteStore(tmp_path / "meta.db")) as (client, port):
        for f in (CLUSTER / "metadata").glob("*.bin"):
            client.create(f.read_bytes(), ledger_id=int(f.stem, 16))
        res = _run(["--ledger-id", "11259375", *_disks(CLUSTER), "--metadata", f"grpc://127.0.0.1:{port}",
                    "--to", "3", "--jsonl"])
        assert res.exit_code == 0, res.stderr
        got = _lines(res)
        assert [(o["digest_type"], o["digest_verified"]) for o in got] == [("HMAC", True)] * 4
        # ledger 16 is CLOSED at entry 59: nothing past it is printed, even with a disk holding more
        whole = _lines(_run(["--ledger-id", "16", *_disks(CLUSTER), "--metadata", f"grpc://127.0.0.1:{port}",
                             "--jsonl"]))
        assert whole[-1]["entry_id"] == 59 and len(whole) == 60
    res = _run(["--ledger-id", "16", *_disks(CLUSTER), "--metadata", "http://x"])
    assert res.exit_code == 2 and "grpc://HOST:PORT" in res.stderr


def test_metadata_that_cannot_be_read_is_one_line_exit_8_not_no_metadata(tmp_path: Path):
    res = _run(["--ledger-id", "16", *_disks(CLUSTER), "--metadata-dir", tmp_path / "none", "--jsonl"])
    assert res.exit_code == 8 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert str(tmp_path / "none") in line and "metadata folder" in line
    bad = tmp_path / "md"
    bad.mkdir()
    (bad / "10.bin").write_bytes(b"BookieMetadataFormatVersion\t3\n\xff\xff")
    res = _run(["--ledger-id", "16", *_disks(CLUSTER), "--metadata-dir", bad, "--jsonl"])
    assert res.exit_code == 8 and res.stdout == "" and len(res.stderr.splitlines()) == 1
    assert str(bad / "10.bin") in res.stderr and "offset" in res.stderr
    t0 = time.monotonic()
    res = _run(["--ledger-id", "16", *_disks(CLUSTER), "--metadata", "grpc://127.0.0.1:1", "--jsonl"])
    assert res.exit_code == 8 and res.stdout == "" and time.monotonic() - t0 < 60
    assert res.stderr.splitlines() == [res.stderr.strip()]
    assert res.stderr.startswith("bkdisk: cannot read ledger metadata from grpc://127.0.0.1:1: RPC_")


HMAC_LEDGER = 11259375


def _hmac_password() -> bytes:
    from bkdisk.bookie.metadata_dir import read_ledger_file
    md = read_ledger_file(str(CLUSTER / "metadata"), LedgerId(0, HMAC_LEDGER))
    assert md.digest_type == "HMAC" and md.password
    return md.password


def test_every_disk_kind_gives_the_master_key_it_keeps_beside_its_index():
    from bkdisk.formats.digests import master_key
    want = master_key(_hmac_password())
    disks = [open_disk(d) for d in _disks(CLUSTER)]
    assert {d.kind for d in disks} == {"index-files", "rocksdb"}
    assert [ledger_copies.master_key(d, LedgerId(0, HMAC_LEDGER)) for d in disks] == [want] * len(disks)
    assert ledger_copies.master_key(disks[0], LedgerId(0, 987654321)) is None    # a ledger it does not hold


def test_password_candidates_verify_hmac_copies_without_metadata(tmp_path: Path):
    candidates = tmp_path / "passwords.txt"
    candidates.write_bytes(b"not-this-one\n" + _hmac_password() + b"\r\nnor this\n")
    res = _run(["--ledger-id", HMAC_LEDGER, *_disks(CLUSTER), "--password-candidates", candidates, "--jsonl"])
    assert res.exit_code == 0, res.stderr
    got = _lines(res)
    want = _wanted(str(HMAC_LEDGER))
    assert [o["payload_sha256"] for o in got] == [want[e]["payload_sha256"] for e in sorted(want)]
    assert {(o["digest_type"], o["digest_verified"]) for o in got} == {("HMAC", True)}
    assert res.stderr == ""
    # none of them: one warning naming the master key; the copies read, not verified
    candidates.write_text("wrong\nalso wrong\n")
    res = _run(["--ledger-id", HMAC_LEDGER, *_disks(CLUSTER), "--password-candidates", candidates, "--jsonl"])
    assert res.exit_code == 0, res.stderr
    assert {o["digest_verified"] for o in _lines(res)} == {False}
    (line,) = res.stderr.splitlines()
    assert "warning" in line and "matches neither the empty password nor any of 2 candidates" in line


def test_a_damaged_hmac_copy_is_skipped_once_the_candidates_give_the_password(cluster: Path, tmp_path: Path):
    w = _wanted(str(HMAC_LEDGER))[2]
    _damage_payload(cluster, w["write_set"][0], HMAC_LEDGER, 2)
    candidates = tmp_path / "passwords.txt"
    candidates.write_bytes(_hmac_password() + b"\n")
    res = _run(["--ledger-id", HMAC_LEDGER, "--from", "2", "--to", "2", *_disks(cluster),
                "--password-candidates", candidates, "--jsonl"])
    assert res.exit_code == 0, res.stderr
    (o,) = _lines(res)
    assert o["payload_sha256"] == w["payload_sha256"] and o["digest_verified"] is True
    assert w["write_set"][0] not in o["intact_copies"] and o["bookie"] != w["write_set"][0]


def test_a_candidates_file_that_is_not_text_is_one_line_exit_8(tmp_path: Path):
    bad = tmp_path / "passwords.bin"
    bad.write_bytes(b"pw\n\x00\x01")
    res = _run(["--ledger-id", HMAC_LEDGER, *_disks(CLUSTER), "--password-candidates", bad, "--jsonl"])
    assert res.exit_code == 8 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert str(bad) in line and "offset 3" in line


def test_a_fifo_in_a_logs_place_is_named_and_its_entries_read_from_other_copies(tmp_path: Path):
    """Opening a FIFO for reading waits for a writer: the command must not (run as a process, bounded)."""
    root = tmp_path / "bk"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root, symlinks=True)
    log = root / "ledgers1" / CURRENT_DIR / "0.log"
    log.unlink()
    os.mkfifo(log)
    script = Path(sys.executable).with_name("bkdisk")
    r = subprocess.run([str(script), "read-ledger", "--ledger-id", "0x1234", str(root)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 4, r.stderr
    assert f"warning: {log}: not a regular file" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_an_index_cut_mid_slot_is_damage_and_the_logs_are_scanned_for_every_entry(tmp_path: Path):
    root = tmp_path / "bk"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root, symlinks=True)
    whole = _run(["--ledger-id", "0x1234", str(root), "--jsonl"])
    idx = root / "ledgers1" / CURRENT_DIR / "12" / "34" / "1234.idx"
    os.truncate(idx, 1100)                       # 9 slots and half of the 10th
    cut = _run(["--ledger-id", "0x1234", str(root), "--jsonl"])
    assert whole.exit_code == 0 and cut.exit_code == 0, cut.stderr
    assert [e["entry_id"] for e in _lines(cut)] == [e["entry_id"] for e in _lines(whole)] == list(range(11))
    assert f"{idx}: offset 1096: expected whole 8-byte location slots" in cut.stderr, cut.stderr


def test_a_damaged_block_of_the_locations_database_is_named_and_the_logs_are_scanned(tmp_path: Path):
    """A data block's checksum is verified only when the block is read: before any location is taken."""
    root = tmp_path / "bk"
    shutil.copytree(GOLDEN / "dbstorage-v6-bookieid", root, symlinks=True)
    whole = _run(["--ledger-id", "0x1234", str(root), "--jsonl"])
    sst = root / "ledgers0" / CURRENT_DIR / "locations" / "000008.sst"
    data = bytearray(sst.read_bytes())
    data[100] ^= 0xFF                            # in the first data block
    sst.write_bytes(bytes(data))
    hurt = _run(["--ledger-id", "0x1234", str(root), "--jsonl"])
    assert whole.exit_code == 0 and hurt.exit_code == 0, hurt.stderr
    assert [e["entry_id"] for e in _lines(hurt)] == [e["entry_id"] for e in _lines(whole)] and _lines(whole)
    assert f"{sst}: offset 0: expected block checksum" in hurt.stderr and "scanned instead" in hurt.stderr, hurt.stderr


@pytest.mark.parametrize("ledger", [x for x in MANIFEST["ledgers"] if x["digest_type"] in ("HMAC", "DUMMY")],
                         ids=lambda x: x["digest_type"])
def test_a_range_of_one_entry_of_an_unverifiable_ledger_is_read_as_in_the_whole_ledger(ledger: dict):
    """Without the password (HMAC) or any digest (DUMMY) a copy's payload length comes from the cumulative
    lengths: the entry before the range is read for its own, never printed."""
    want = _wanted(ledger["ledger_id"])
    for e in sorted(want)[1:6]:
        res = _run(["--ledger-id", ledger["ledger_id"], *_disks(CLUSTER), "--jsonl", "--from", e, "--to", e])
        assert res.exit_code == 0, res.output
        [o] = _lines(res)
        assert (o["entry_id"], o["payload_sha256"]) == (e, want[e]["payload_sha256"])


@pytest.mark.parametrize("ledger", ["255", "256"], ids=["HMAC", "DUMMY"])
def test_a_copy_whose_size_prefix_was_changed_is_not_given_and_its_neighbours_are_exact(tmp_path: Path, ledger):
    """Entry 4's size prefix says 8 bytes more: its record then ends inside the next one's, and without a
    digest to verify, where its payload lies is unknown. It is lost (exit 4); entries 3 and 5 come back as
    written, their payload lengths from the cumulative lengths, not from entry 4's odd digest length."""
    from bkdisk.formats.entrylog import ENTRY_SIZE
    src = GOLDEN / "interleaved-v6-hostport"
    root = tmp_path / "bk"
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("tool-output"))
    m = json.loads((src / "manifest.json").read_text())
    [rec] = [r for r in m["entry_log_records"] if r["ledger_id"] == ledger and r["entry_id"] == 4]
    log = root / rec["ledger_dir"] / CURRENT_DIR / rec["entry_log_file"]
    log.chmod(0o644)
    with open(log, "r+b") as fh:
        fh.seek(rec["offset"])
        fh.write(ENTRY_SIZE.build(rec["size"] + 8))
    want = {e["entry_id"]: e for e in m["entries"] if e["ledger_id"] == ledger}
    res = _run(["--ledger-id", ledger, root, "--jsonl", "--from", 3, "--to", 5])
    assert res.exit_code == 4, res.output
    got = {o["entry_id"]: o for o in _lines(res)}
    assert got[4]["lost"] and got[4]["payload_sha256"] is None
    assert [got[e]["payload_sha256"] for e in (3, 5)] == [want[e]["payload_sha256"] for e in (3, 5)]


@pytest.mark.parametrize("value", ["-1", str(1 << 63), "99999999999999999999999"])
def test_an_entry_id_outside_a_java_long_is_a_usage_error(value: str):
    res = _run(["--ledger-id", "0", *_disks(CLUSTER), "--from", value])
    assert res.exit_code == 2 and "expected an entry id from 0 to 9223372036854775807" in res.output, res.output


def test_copies_that_differ_with_no_digest_to_tell_them_apart_are_said(cluster: Path):
    """An HMAC ledger read without its password: a copy damaged on the first disk cannot be told from the
    others by its digest. The first disk's is given (as documented), and the disagreement is said."""
    w = _wanted("4096")[3]
    first = w["write_set"][0]
    disks = [str(cluster / "bookies" / first)] + [d for d in _disks(cluster) if not d.endswith(first)]
    _damage_payload(cluster, first, 4096, 3)
    res = _run(["--ledger-id", "4096", "--from", "2", "--to", "4", *disks, "--jsonl"])
    assert res.exit_code == 0, res.output
    assert "entry 3: the copies differ and no digest could be verified" in res.stderr, res.stderr
    res = _run(["--ledger-id", "4096", "--from", "2", "--to", "4", *_disks(cluster), "--jsonl",
                "--metadata-dir", cluster / "metadata"])
    assert "differ" not in res.stderr and {o["entry_id"]: o for o in _lines(res)}[3]["payload_sha256"] == \
        w["payload_sha256"]


def test_a_locations_database_whose_manifest_is_cut_short_is_bypassed_by_a_scan(tmp_path: Path):
    """The MANIFEST's last edits (the tables they name) are gone: any location may be out of sight, so the
    ledger's entries are found by scanning the disk's entry logs, and said so."""
    src = GOLDEN / "dbstorage-v6-bookieid"
    root = tmp_path / "bk"
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("tool-output"))
    [manifest] = (root / "ledgers0" / "current" / "locations").glob("MANIFEST-*")
    manifest.chmod(0o644)
    os.truncate(manifest, 100)
    m = json.loads((src / "manifest.json").read_text())
    want = {e["entry_id"]: e["payload_sha256"] for e in m["entries"] if e["ledger_id"] == "0"}
    res = _run(["--ledger-id", "0", root, "--metadata-dir", src / "metadata", "--jsonl"])
    assert res.exit_code == 0, res.output
    assert {o["entry_id"]: o["payload_sha256"] for o in _lines(res)} == want
    assert "its entry logs were scanned instead" in res.stderr and str(manifest) in res.stderr
