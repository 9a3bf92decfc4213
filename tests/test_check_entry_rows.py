"""A check keeps its entry-log scans' rows without the LAC and ledger length each entry carries
(CHECK_ENTRY_DTYPE: 37 bytes a row instead of 53, in memory and in the spill folder), as no pass reads
them after the scan; the audit's check keeps them (its replica rows do). The narrow rows are the wide
rows' other fields, the digests they give are the same, and where a digest check must infer a digest's
length from the ledger lengths (a ledger whose type no entry shows), it reads them from the headers."""
from __future__ import annotations

import numba
import numpy as np
import pytest

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.digests.plan import DigestPlan
from bkdisk.diskio.scan_sink import Room, ScanSink
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.diskio.windowed import Columns
from bkdisk.entrylogs.arrays import CHECK_ENTRY_DTYPE, ENTRY_DTYPE
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.scan_parts import log_scan_parts
from bkdisk.formats.digests import DigestType
from tests.fsck_helpers import flip

WINDOW = 4096


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Logs of ledgers of every digest type, one HMAC ledger's password unknown to the check."""
    root = str(tmp_path_factory.mktemp("mixed") / "bookie")
    types = [DigestType.CRC32C, DigestType.CRC32, DigestType.HMAC, DigestType.DUMMY]
    ledgers = [LedgerSpec(i + 1, [bytes([i, e % 251]) * (5 + e % 40) for e in range(400)],
                          digest_type=types[i % 4], password=b"pw") for i in range(8)]
    ledgers.append(LedgerSpec(99, [b"v2" * (e + 3) for e in range(50)], scope_id=7))   # V2 entries
    return write_bookie(BookieSpec(ledgers, entry_log_size_limit=64 << 10), root)


def _scan(log, dtype, sink=None, plan=None):
    plan = DigestPlan() if plan is None else plan
    s = scan_entry_log(log, window=WINDOW, digests=plan, digest_facts=True, sink=sink, entry_dtype=dtype)
    if sink is None:
        return s.entries, s.digests, plan
    parts = list(log_scan_parts(s, 53))
    return np.concatenate([p.entries for p in parts]), np.concatenate([p.digests for p in parts]), plan


@pytest.mark.parametrize("spilled", [False, True])
def test_narrow_rows_are_the_wide_rows_fields_with_the_same_digests(mixed, tmp_path, spilled):
    damaged = str(tmp_path / "log")
    with open(mixed.entry_log_files[0], "rb") as f, open(damaged, "wb") as g:
        g.write(f.read())
    flip(damaged, 3000)   # a payload byte: one digest bad, the same in both
    for log in [*mixed.entry_log_files, damaged]:
        with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
            sink = (lambda: ScanSink(Room(0), folder)) if spilled else (lambda: None)
            wide, wide_digests, wide_plan = _scan(log, ENTRY_DTYPE, sink())
            narrow, narrow_digests, narrow_plan = _scan(log, CHECK_ENTRY_DTYPE, sink())
        assert narrow.dtype == CHECK_ENTRY_DTYPE and len(narrow) == len(wide) > 0
        assert np.array_equal(narrow, wide[list(CHECK_ENTRY_DTYPE.names)].astype(CHECK_ENTRY_DTYPE))
        assert np.array_equal(narrow_digests, wide_digests)
        assert narrow_plan.dlen_hint == wide_plan.dlen_hint


def test_a_digest_length_inferred_for_narrow_rows_comes_from_the_entries_headers(mixed):
    # the HMAC ledgers (3, 7) without their password and the DUMMY ones (4, 8) verify as nothing: their
    # digest length is inferred from the ledger lengths, which narrow rows do not hold
    plans = [_scan(log, CHECK_ENTRY_DTYPE)[2] for log in mixed.entry_log_files]
    hints = {k: v for p in plans for k, v in p.dlen_hint.items()}
    assert hints == {(0, 3): 20, (0, 7): 20, (0, 4): 0, (0, 8): 0}


def test_a_check_keeps_narrow_rows_and_the_audit_wide_ones(mixed):
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    from bkdisk.fsck.scans import scan_logs

    report = check_bookie(discover(mixed.root), CheckOptions())
    try:
        ctx = report.context
        assert {s.entries.dtype for s in scan_logs(ctx).values()} == {CHECK_ENTRY_DTYPE}
        ctx.options.entry_lengths = True
        assert {s.entries.dtype for s in scan_logs(ctx).values()} == {ENTRY_DTYPE}
    finally:
        report.close()


def test_findings_are_the_same_whichever_rows_a_check_keeps(mixed, tmp_path):
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions

    def findings(entry_lengths):
        report = check_bookie(discover(mixed.root), CheckOptions(entry_lengths=entry_lengths,
                                                                 memory=MemoryLimit(1, str(tmp_path))))
        try:
            return [(f.code, f.path, f.detail) for f in report.findings]
        finally:
            report.close()

    assert findings(False) == findings(True)


def test_a_field_the_kernel_fills_but_the_table_does_not_keep_is_given_as_one_value():
    wide = Columns(ENTRY_DTYPE, 100)
    narrow = Columns(CHECK_ENTRY_DTYPE, 100, kernel=ENTRY_DTYPE)
    assert [a.dtype for a in narrow.arrays] == [a.dtype for a in wide.arrays]
    # the same compiled kernel serves both: numba types each array alike
    assert [numba.typeof(a) for a in narrow.arrays] == [numba.typeof(a) for a in wide.arrays]
    lac = narrow.arrays[ENTRY_DTYPE.names.index("lac")]
    lac[:] = np.arange(100)
    assert lac.strides == (0,) and narrow.table(0, 100).nbytes == 100 * CHECK_ENTRY_DTYPE.itemsize
    narrow.grow_if_full(100)
    assert len(narrow.arrays[0]) == 200 and narrow.arrays[ENTRY_DTYPE.names.index("length")].strides == (0,)
    with pytest.raises(ValueError, match="fills no"):
        Columns(ENTRY_DTYPE, 10, kernel=CHECK_ENTRY_DTYPE)
