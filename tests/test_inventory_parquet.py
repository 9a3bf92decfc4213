"""``bkdisk inventory --parquet``: the rows as Arrow equal the JSON lines, and the file is the one pyarrow
writes from those rows (same rows, schema and stored Arrow schema), its columns stored compactly."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import GOLDEN
from hypothesis import given, settings
from hypothesis import strategies as st

import bkdisk.inventory_cli
from bkdisk.bookie.inventory import LogRows, scan_bookie
from bkdisk.bookie.layout import discover_all
from bkdisk.digests.payload_hashes import PayloadHashes
from bkdisk.digests.plan import DigestPlan
from bkdisk.digests.verify import DIGEST_DTYPE
from bkdisk.entrylogs.arrays import ENTRY_DTYPE
from bkdisk.inventory_cli import ROW_GROUP, inventory

REPO = Path(__file__).resolve().parents[1]
CLUSTER = GOLDEN / "cluster-3" / "bookies"   # three bookies under one ROOT: a bookie_id each


def _ints(dtype, lo=None, hi=None):
    info = np.iinfo(dtype)
    return st.integers(info.min if lo is None else lo, info.max if hi is None else hi)


ROW = st.tuples(_ints(np.int64, 0), _ints(np.uint64), _ints(np.uint64), _ints(np.int64, -1), st.integers(1, 3),
                _ints(np.int32, 0), _ints(np.int64, -1), _ints(np.int64, 0),
                st.integers(0, 4), st.integers(0, 3), st.integers(0, 2), _ints(np.int64, -1, 1 << 40),
                st.one_of(st.none(), st.binary(min_size=32, max_size=32)))


def _log_rows(rows, bookie_id, hashed: bool) -> LogRows:
    entries = np.zeros(len(rows), ENTRY_DTYPE)
    digests = np.zeros(len(rows), DIGEST_DTYPE)
    for i, r in enumerate(rows):
        entries[i] = (r[0], r[5], r[4], r[1], r[2], r[3], r[6], r[7])
        digests[i] = (r[8], r[9], r[10], r[11])
    hashes = PayloadHashes(np.array([list(r[12] or bytes(32)) for r in rows], np.uint8).reshape(-1, 32),
                           np.array([r[12] is not None for r in rows], bool))
    raw, at = (hashes.raw, np.where(hashes.present, np.arange(len(rows)), -1)) if hashed else (None, None)
    return LogRows(bookie_id, "ledgers-0", 0x1f, "/x/1f.log", entries, digests, raw, at)


@settings(max_examples=60, deadline=None)
@given(st.lists(ROW, max_size=30), st.one_of(st.none(), st.text(max_size=12)), st.booleans())
def test_arrow_rows_and_their_coded_form_equal_the_json_lines(rows, bookie_id, hashed):
    log = _log_rows(rows, bookie_id, hashed)
    want = [json.loads(line) for line in log.jsonl().splitlines()]
    plain, coded = log.arrow(), log.arrow(coded=True)
    for batch in (plain, coded):
        batch.validate(full=True)
        assert batch.to_pylist() == want
    assert all(pa.types.is_string(f.type) for f in plain.schema if f.name in {"bookie_id", "digest_type"})
    assert pa.types.is_dictionary(coded.schema.field("digest_source").type)
    assert coded.cast(plain.schema).equals(plain)


def _plain_rows(root: Path) -> pa.Table:
    """The rows of every bookie under ``root`` as ``LogRows.arrow()`` gives them (string columns)."""
    batches = [rows.arrow() for dirs in discover_all(str(root))
               for rows in scan_bookie(dirs, DigestPlan(), payload_hash="sha256")
               if not isinstance(rows, str) and len(rows)]
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize("row_group", [ROW_GROUP, 7], ids=["default", "7-rows"])
def test_the_file_is_what_pyarrow_writes_from_the_rows_with_compact_columns(tmp_path, monkeypatch, row_group):
    # 7 rows a group: each log's rows are several groups, each built in the arrays the one before used
    monkeypatch.setattr(bkdisk.inventory_cli, "ROW_GROUP", row_group)
    target = tmp_path / "rows.parquet"
    r = CliRunner().invoke(inventory, [str(CLUSTER), "--parquet", str(target), "--payload-hash", "sha256"])
    assert r.exit_code == 0, r.stderr
    plain = _plain_rows(CLUSTER)
    assert len(set(plain["bookie_id"].to_pylist())) == 3
    pq.write_table(plain, tmp_path / "pyarrow.parquet")
    ours, theirs = pq.ParquetFile(target), pq.ParquetFile(tmp_path / "pyarrow.parquet")
    got = ours.read()
    assert got.equals(theirs.read()) and got.equals(plain)
    assert got.schema.equals(plain.schema, check_metadata=True)
    assert ours.metadata.metadata == theirs.metadata.metadata   # the stored Arrow schema, byte for byte
    assert ours.schema.equals(theirs.schema)                     # the Parquet schema
    meta = ours.metadata
    for g in range(meta.num_row_groups):
        chunks = {meta.row_group(g).column(c).path_in_schema: meta.row_group(g).column(c)
                  for c in range(meta.num_columns)}
        assert all("DELTA_BINARY_PACKED" in chunks[c].encodings for c in ("offset", "length", "size", "payload_len"))
        assert all("RLE_DICTIONARY" in chunks[c].encodings
                   for c in ("bookie_id", "ledger_dir", "digest_type", "digest_source", "ledger"))
        # min and max for every column (a group whose column is all nulls has none to give)
        assert all(chunks[c].statistics.has_min_max or chunks[c].statistics.null_count == chunks[c].num_values
                   for c in chunks)
        assert {chunks[c].compression for c in chunks} == {"SNAPPY"}
        assert meta.row_group(g).num_rows <= row_group


def test_writing_parquet_does_not_load_pandas(tmp_path):
    # pyarrow loads pandas, when installed, at its first conversion of a numpy array: start-up the rows do not need
    assert importlib.util.find_spec("pandas") is not None, "pandas is installed with the audit extra"
    src = ("import sys\nfrom bkdisk.cli import main\ntry:\n    main()\nfinally:\n"
           "    print('pandas' in sys.modules, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", src, "inventory", str(GOLDEN / "interleaved-v6-hostport"),
                        "--parquet", str(tmp_path / "rows.parquet")], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[-1] == "False"


class _FailingWrites:
    """pyarrow's ParquetWriter.write_batch, counted, raising at the ``fail_at``-th call (0: never)."""

    def __init__(self, monkeypatch, fail_at: int):
        self.calls, self.fail_at, self.real = 0, fail_at, pq.ParquetWriter.write_batch
        monkeypatch.setattr(pq.ParquetWriter, "write_batch", self)

    def __get__(self, writer, owner=None):
        return lambda *a, **kw: self(writer, *a, **kw)

    def __call__(self, writer, *a, **kw):
        self.calls += 1
        if self.calls == self.fail_at:
            raise OSError(28, "No space left on device")
        return self.real(writer, *a, **kw)


@pytest.mark.parametrize("which", ["second", "last"])
def test_a_row_group_that_cannot_be_written_fails_the_command_and_leaves_no_file(tmp_path, monkeypatch, which):
    monkeypatch.setattr(bkdisk.inventory_cli, "ROW_GROUP", 7)
    args = [str(CLUSTER), "--parquet", str(tmp_path / "rows.parquet")]
    with monkeypatch.context() as m:
        groups = _FailingWrites(m, 0)
        assert CliRunner().invoke(inventory, args).exit_code == 0
    (tmp_path / "rows.parquet").unlink()
    assert groups.calls > 2
    _FailingWrites(monkeypatch, 2 if which == "second" else groups.calls)
    r = CliRunner().invoke(inventory, args)
    assert r.exit_code == 8 and r.stderr == "bkdisk: the output: cannot write or read (No space left on device)\n"
    assert list(tmp_path.iterdir()) == []
