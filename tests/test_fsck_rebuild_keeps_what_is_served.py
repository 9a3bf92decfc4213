"""A rebuilt ``.idx`` serves what the bookie served: the copy the index pointed at when it verifies, the
page size the bookie's other index files show, the explicit LAC a damaged header still holds. Each on
a copy of a real BookKeeper disk, repaired through the command."""
from __future__ import annotations

import dataclasses
import hashlib
import os

import pytest
from test_fsck_golden_faults import _clean_copy, _every_manifest_entry_is_served, _only, _repair

from bkdisk.bookie.layout import discover
from bkdisk.bookie.lookup import read_entry
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import build_entry, package_entry
from bkdisk.formats.entrylog import ENTRY_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import STATE_FENCED, IndexHeader, build_header, lac_after_state, parse_header
from bkdisk.formats.journal import LAC_BODY


def _append_copy(path: str, ledger: int, entry: int, digest: DigestType, payload: bytes) -> None:
    """A later copy of an entry, its digest good, written at the end of an entry log."""
    e = package_entry(ledger_id=ledger, entry_id=entry, last_add_confirmed=entry - 1, length=len(payload),
                      payload=payload, digest_type=digest)
    body = build_entry(e)
    with open(path, "ab") as fh:
        fh.write(ENTRY_SIZE.build(len(body)) + body)


def test_a_rebuild_for_a_header_keeps_the_verified_copy_the_index_points_at(tmp_path):
    """A header fix (the fence bit) rebuilds the index: a later copy of an entry, which the check names
    garbage (the index points at the earlier one), must not become the copy the bookie serves."""
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    led = next(x for x in c.manifest["ledgers"] if x["digest_type"] in ("CRC32", "CRC32C") and x["fenced"])
    lid = int(led["ledger_id"])
    current = max(c.manifest["entry_log_records"], key=lambda r: int(r["entry_log_file"].split(".")[0], 16))
    _append_copy(c.log_path(current), lid, 5, DigestType[led["digest_type"]], b"X" * 64)   # (the log being written)
    assert _only(c.check(), "GARBAGE_ENTRIES")
    idx = c.index_path(lid)
    with open(idx, "rb") as fh:
        head = fh.read(1024)
    h = parse_header(head)
    with open(idx, "r+b") as fh:
        fh.write(build_header(dataclasses.replace(h, state_bits=h.state_bits & ~STATE_FENCED)))
    served = hashlib.sha256(read_entry(discover(c.root), LedgerId(0, lid), 5)).hexdigest()
    assert _only(c.check(), "INDEX_NOT_FENCED")
    _repair(c)
    assert parse_header(open(idx, "rb").read(1024)).fenced
    assert hashlib.sha256(read_entry(discover(c.root), LedgerId(0, lid), 5)).hexdigest() == served
    _every_manifest_entry_is_served(c)


@pytest.mark.parametrize("cut_to", [2003, 2000])
def test_a_rebuilt_index_has_the_page_size_the_other_index_files_show(tmp_path, cut_to):
    """interleaved-v4-smallpage runs with pageSize 1024. The index cut short, its size no multiple of a
    page, tells nothing of it: the rebuilt file is the bookie's own, byte for byte."""
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    idx = c.index_path(0x1234)
    with open(idx, "rb") as fh:
        before = fh.read()
    assert len(before) % 1024 == 0 and len(before) > cut_to
    os.truncate(idx, cut_to)
    _repair(c)
    with open(idx, "rb") as fh:
        assert fh.read() == before
    _every_manifest_entry_is_served(c)


def test_a_rebuild_over_a_damaged_signature_keeps_the_explicit_lac_the_header_still_holds(tmp_path):
    """The signature damaged, the header is refused whole; its key length, state and explicit-LAC body are
    still where they were, and the journals no longer hold the LAC record: the rebuilt index keeps it."""
    c = _clean_copy("sorted-v5-bookieid", tmp_path)
    lid = max(int(x["ledger_id"]) for x in c.manifest["ledgers"] if x["explicit_lac"] is not None)
    idx = c.index_path(lid)
    with open(idx, "rb") as fh:
        before = fh.read()
    assert parse_header(before).explicit_lac_body
    with open(idx, "r+b") as fh:
        fh.write(b"XXXX")
    assert _only(c.check(), "INDEX_HEADER_BAD")
    _repair(c)
    with open(idx, "rb") as fh:
        assert fh.read() == before


def test_a_refused_header_gives_its_explicit_lac_only_where_its_fields_still_say_so():
    h = IndexHeader(1, bytes(range(20)), STATE_FENCED, LAC_BODY.build(dict(ledger_id=7, lac=3, digest=b"d" * 4)))
    head = b"XXXX" + build_header(h)[4:]
    assert lac_after_state(head, 7) == h.explicit_lac_body
    assert lac_after_state(head, 8) is None                                   # another ledger's body
    assert lac_after_state(build_header(dataclasses.replace(h, version=0, explicit_lac_body=None)), 7) is None
    assert lac_after_state(head[:8] + (19).to_bytes(4, "big") + head[12:], 7) is None   # not a master key's length
    assert lac_after_state(head[:36] + (9).to_bytes(4, "big") + head[40:], 7) is None   # shorter than any body
