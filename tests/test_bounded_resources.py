"""Memory follows the work, not the sizes a file has or claims: sparse multi-GiB files and huge length
fields give a finding or a one-line error within a fixed RSS ceiling, never a traceback or a hang.

Each command runs as its own process, started by a small launcher so that its peak RSS is its own.
The timeout is a hang guard, not a speed check.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fsck_helpers import patch

from bkdisk.bookie.writer import write_bookie
from bkdisk.demo import sample_spec
from bkdisk.formats.codec import build_field, field_offset
from bkdisk.formats.entrylog import ENTRY_LOG_HEADER_FIELDS, ENTRY_SIZE
from bkdisk.formats.entrylog import HEADER_SIZE as LOG_HEADER_SIZE
from bkdisk.formats.journal import SECTOR_SIZE, header_size, parse_header

RSS_CEILING_MIB = 400
HANG_GUARD_S = 300
GIB = 1 << 30
BIG_INT32 = ENTRY_SIZE.build(0x7FFFFFFF)

LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_pid, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status), file=sys.stderr)
"""


def _run(*args: str) -> tuple[int, int, str, str]:
    """(exit code, peak RSS MiB, stdout, stderr) of a bkdisk command."""
    cmd = [sys.executable, "-c", LAUNCHER, sys.executable, "-c", "from bkdisk.cli import main; main()", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S)
    *err_lines, last = r.stderr.strip().splitlines() or [""]
    rss, code = map(int, last.split())
    return code, rss, r.stdout, "\n".join(err_lines)


@pytest.fixture(scope="module")
def bookie(tmp_path_factory):
    root = tmp_path_factory.mktemp("bounded") / "bookie"
    return write_bookie(sample_spec(), str(root)), str(root)


def _copy(bookie, tmp_path) -> tuple[object, str]:
    import shutil
    written, root = bookie
    dst = str(tmp_path / "bookie")
    shutil.copytree(root, dst)
    remap = lambda p: p.replace(root, dst, 1)  # noqa: E731
    return written, dst, remap


def _assert_bounded(code: int, rss: int, out: str, err: str, ok: tuple[int, ...]) -> None:
    assert code in ok, err
    assert rss < RSS_CEILING_MIB, f"peak RSS {rss} MiB"
    assert "Traceback" not in err and "MemoryError" not in err, err


def test_entry_log_grown_sparse_to_4_gib_is_checked_within_the_ceiling(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    log = remap(written.entry_log_files[0])
    os.truncate(log, 4 * GIB + 12345)        # a hole: the file claims 4 GiB of zeros after its entries
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    json.loads(out)
    code, rss, out, err = _run("inventory", root, "--jsonl")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    code, rss, out, err = _run("dump", "entrylog", log, "--json")
    _assert_bounded(code, rss, out, err, ok=(0, 8))


def test_an_entry_claiming_2_gib_is_a_finding_not_an_allocation(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    log = remap(written.entry_log_files[0])
    patch(log, LOG_HEADER_SIZE, BIG_INT32)   # the first entry's size prefix
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(4,))
    doc = json.loads(out)
    assert any(f["path"] == log and f["offset"] == LOG_HEADER_SIZE for f in doc["findings"])
    code, rss, out, err = _run("dump", "entrylog", log)
    _assert_bounded(code, rss, out, err, ok=(8,))
    assert err.count("\n") == 0 and log in err and f"offset {LOG_HEADER_SIZE}" in err


def test_a_ledgers_map_offset_past_the_end_is_a_finding(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    rolled = [remap(p) for p in written.entry_log_files if os.path.getsize(p) > LOG_HEADER_SIZE][0]
    field = "ledgers_map_offset"
    patch(rolled, field_offset(ENTRY_LOG_HEADER_FIELDS, field), build_field(ENTRY_LOG_HEADER_FIELDS, field, 1 << 46))
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    code, rss, out, err = _run("dump", "entrylog", rolled, "--metadata")
    _assert_bounded(code, rss, out, err, ok=(0, 8))


def test_journal_grown_sparse_to_4_gib_is_checked_and_dumped_within_the_ceiling(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    j = remap(written.journal_files[-1])
    os.truncate(j, 4 * GIB)
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    code, rss, out, err = _run("dump", "journal", j)
    _assert_bounded(code, rss, out, err, ok=(0, 8))


def test_a_journal_record_claiming_2_gib_is_a_torn_tail_not_an_allocation(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    j = remap(written.journal_files[-1])
    with open(j, "rb") as fh:
        first_record = header_size(parse_header(fh.read(SECTOR_SIZE)))
    patch(j, first_record, BIG_INT32)
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(4,))
    assert any(f["path"] == j and f["offset"] == first_record for f in json.loads(out)["findings"])
    code, rss, out, err = _run("dump", "journal", j)
    _assert_bounded(code, rss, out, err, ok=(8,))
    assert j in err and err.count("\n") == 0 and f"offset {first_record}" in err


def test_a_journal_record_claiming_2_gib_inside_a_4_gib_sparse_journal_is_verified_within_the_ceiling(bookie,
                                                                                                         tmp_path):
    # The length fits in the file, so the record is whole to BookKeeper's reader (which bounds no record's
    # length): its digest is verified, streamed in chunks, never mapped whole.
    from bkdisk.bookie.writer import write_metadata_dir
    written, root, remap = _copy(bookie, tmp_path)
    md = str(tmp_path / "metadata")
    write_metadata_dir(sample_spec(), md)
    j = remap(written.journal_files[-1])
    with open(j, "rb") as fh:
        first_record = header_size(parse_header(fh.read(SECTOR_SIZE)))
    os.truncate(j, 4 * GIB)
    patch(j, first_record, ENTRY_SIZE.build(2 * GIB - 4096))
    code, rss, out, err = _run("fsck", root, "--metadata-dir", md, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(4,))
    [f] = [f for f in json.loads(out)["findings"] if f["path"] == j]
    assert (f["code"], f["offset"]) == ("JOURNAL_TORN_TAIL", first_record)   # its digest does not match
    # The dump shows the record's fields and its size without reading its 2 GiB payload.
    code, rss, out, err = _run("dump", "journal", j)
    _assert_bounded(code, rss, out, err, ok=(0, 8))
    assert f"ByteOffset={first_record}, EntrySize={2 * GIB - 4096} " in out
    code, rss, out, err = _run("dump", "journal", "--json", j)
    _assert_bounded(code, rss, out, err, ok=(0, 8))
    first = json.loads(out.splitlines()[0])
    assert (first["offset"], first["size"]) == (first_record, 2 * GIB - 4096)


def test_records_larger_than_a_window_are_verified_as_the_windowed_path_verifies_them(tmp_path, monkeypatch):
    from fsck_helpers import flip, make_disk

    import bkdisk.digests.verify
    import bkdisk.journal.digests
    from bkdisk.journal.reader import read_journal
    disk = make_disk(str(tmp_path / "b"))
    j = disk.written.journal_files[0]
    data = [r for r in read_journal(j).records if r.kind == 0]
    flip(j, data[len(data) // 2].offset + 60)     # a payload byte of a record in the middle

    def journal_findings(**kw):
        return sorted((f.code, f.path, f.offset) for f in disk.check(**kw).findings if f.code.startswith("JOURNAL"))

    windowed = journal_findings()
    assert [c for c, p, o in windowed] == ["JOURNAL_RECORD_CORRUPT"]
    monkeypatch.setattr(bkdisk.journal.digests, "JOURNAL_WINDOW", 0)      # every record streamed on its own
    monkeypatch.setattr(bkdisk.digests.verify, "STREAM_CHUNK", 7)         # and read in chunks that cut its digest
    assert journal_findings() == windowed
    disk.md_dir = None                                             # digest types sniffed, not given
    assert journal_findings() == windowed


def _length_fields(written, remap) -> dict[str, tuple[str, int, str]]:
    """name -> (file, offset of a length field in it, the dump subcommand that reads the file)."""
    from bkdisk.formats.entrylog import LEDGERS_MAP_BATCH
    from bkdisk.formats.entrylog import parse_header as parse_log_header
    from bkdisk.formats.index import INDEX_HEADER_FIELDS
    from bkdisk.formats.journal import KEY_LENGTH_AT, LAC_BODY_LENGTH_AT, RECORD_LENGTH_SIZE, RecordKind
    from bkdisk.journal.reader import read_journal
    idx = remap(next(iter(written.index_files.values())))
    rolled = [remap(p) for p in written.entry_log_files if os.path.getsize(p) > LOG_HEADER_SIZE][0]
    with open(rolled, "rb") as fh:
        map_at = parse_log_header(fh.read(LOG_HEADER_SIZE)).ledgers_map_offset
    out = {"index master key length": (idx, field_offset(INDEX_HEADER_FIELDS, "master_key_length"), "index"),
           "ledgers map batch size": (rolled, map_at, "entrylog"),
           "ledgers map batch count": (rolled, map_at + field_offset(LEDGERS_MAP_BATCH, "count"), "entrylog")}
    body_field = {RecordKind.PADDING: 0, RecordKind.LEDGER_KEY: KEY_LENGTH_AT,
                  RecordKind.EXPLICIT_LAC: LAC_BODY_LENGTH_AT}
    for j in written.journal_files:
        for r in read_journal(j).records:
            if r.kind in body_field and f"journal {r.kind.name.lower()} length" not in out:
                out[f"journal {r.kind.name.lower()} length"] = (remap(j), r.offset + RECORD_LENGTH_SIZE
                                                                + body_field[r.kind], "journal")
    assert len(out) == 6, sorted(out)
    return out


@pytest.mark.parametrize("field", ["index master key length", "ledgers map batch size", "ledgers map batch count",
                                   "journal padding length", "journal ledger_key length",
                                   "journal explicit_lac length"])
def test_a_huge_value_in_every_length_field_is_a_finding_within_the_ceiling(bookie, tmp_path, field):
    written, root, remap = _copy(bookie, tmp_path)
    path, at, kind = _length_fields(written, remap)[field]
    patch(path, at, BIG_INT32)
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(4,))
    assert any(f["path"] == path for f in json.loads(out)["findings"] if f["severity"] == "error"), out
    code, rss, out, err = _run("dump", kind, path, *(["--metadata"] if kind == "entrylog" else []))
    _assert_bounded(code, rss, out, err, ok=(0, 8))
    if code == 8:
        assert err.count("\n") == 0 and path in err, err


def test_dump_of_a_16_gib_sparse_index_stays_within_the_ceiling(bookie, tmp_path):
    from bkdisk.formats.index import LOCATION, pack_location, slot_offset
    written, root, remap = _copy(bookie, tmp_path)
    idx = remap(next(iter(written.index_files.values())))
    far = (1 << 31) - 2
    with open(idx, "r+b") as fh:
        fh.seek(slot_offset(far))
        fh.write(LOCATION.build(pack_location(3, 4100)))
    code, rss, out, err = _run("dump", "index", idx, "--json")
    _assert_bounded(code, rss, out, err, ok=(0,))
    last = json.loads(out.splitlines()[-1])
    assert (last["entry"], last["log"], last["pos"], last["slot_offset"]) == (far, 3, 4100, slot_offset(far))
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
