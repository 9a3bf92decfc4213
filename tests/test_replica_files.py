"""A scan task writes its disk's replicas itself (audit/replica_files.py): the file holds exactly the
disk's replica rows and appears only when the disk was audited; every other row is passed on, the
disk's row last; nothing is left behind by a disk that fails, a stream that raises or a task that
stops early."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bkdisk.audit import replica_files
from bkdisk.audit.replica_files import remove_unfinished, replica_file, temporary_name, write_replicas
from bkdisk.audit.rows import RunInfo, split_tables, table_schema, task_batch

RUN = RunInfo("run-1", "0.1.0", "host-a")


def replicas(first: int, n: int, bid: str = "bk-1") -> pa.RecordBatch:
    return task_batch("replicas", RUN, bid, {
        "ledger_scope": [0] * n, "ledger_id": [7] * n, "entry_id": list(range(first, first + n)),
        "payload_sha256": [f"{i:064x}" for i in range(first, first + n)], "digest_ok": [i % 5 != 0 for i in range(n)],
        "digest_type": ["CRC32C"] * n, "size": [100] * n, "payload_len": [50] * n, "ledger_dir": ["ledgers"] * n,
        "log_id": [first // 1000] * n, "offset": [1024 + 100 * i for i in range(n)]}, n)


def findings(n: int) -> pa.RecordBatch:
    return task_batch("findings", RUN, "bk-1", {"code": ["X"] * n, "severity": ["info"] * n}, n)


def disk(status: str) -> pa.RecordBatch:
    return task_batch("disks", RUN, "bk-1", {"path": ["/d"], "status": [status]}, 1)


def folder_names(d) -> list[str]:
    return sorted(os.listdir(d))


def test_the_file_holds_exactly_the_replica_rows_and_the_rest_is_passed_on_disk_row_last(tmp_path):
    stream = [findings(2), replicas(0, 3), replicas(1000, 4), disk("errors")]
    path = replica_file(str(tmp_path), 3)
    assert os.path.basename(path) == "disk-00003.parquet"
    passed = []
    for b in write_replicas(iter(stream), path):
        passed.append(b)
        if b.column("table")[0].as_py() == "findings":
            assert not os.path.exists(path)   # published only once the disk's row said it was audited
    assert [b.column("table")[0].as_py() for b in passed] == ["findings", "disks"]
    got = pq.read_table(path)
    assert got.schema == table_schema("replicas")
    assert got.equals(split_tables(stream)["replicas"])
    assert folder_names(tmp_path) == ["disk-00003.parquet"]


def test_row_groups_are_bounded_and_every_row_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(replica_files, "ROW_GROUP_ROWS", 5)
    stream = [replicas(1000 * i, 3) for i in range(6)] + [disk("ok")]
    path = replica_file(str(tmp_path), 0)
    assert [b.column("table")[0].as_py() for b in write_replicas(iter(stream), path)] == ["disks"]
    f = pq.ParquetFile(path)
    assert f.metadata.num_row_groups == 3 and f.metadata.num_rows == 18
    assert f.read().equals(split_tables(stream)["replicas"])


@pytest.mark.parametrize("status", ["not_audited", "unreadable"])
def test_a_disk_not_audited_publishes_no_file_and_removes_an_earlier_attempts(tmp_path, status):
    path = replica_file(str(tmp_path), 1)
    pq.write_table(split_tables([replicas(0, 2)])["replicas"], path)   # a previous attempt of the task
    passed = list(write_replicas(iter([replicas(0, 3), disk(status)]), path))
    assert [b.column("status")[0].as_py() for b in passed] == [status]
    assert folder_names(tmp_path) == []


def test_a_stream_without_a_disk_row_publishes_nothing(tmp_path):
    path = replica_file(str(tmp_path), 1)
    assert list(write_replicas(iter([replicas(0, 3)]), path)) == []
    assert folder_names(tmp_path) == []


def test_a_stream_that_raises_or_a_consumer_that_stops_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(replica_files, "ROW_GROUP_ROWS", 2)   # a temporary file is being written

    def failing():
        yield replicas(0, 3)
        yield findings(1)
        raise RuntimeError("the scan broke")

    path = replica_file(str(tmp_path), 2)
    with pytest.raises(RuntimeError, match="the scan broke"):
        list(write_replicas(failing(), path))
    assert folder_names(tmp_path) == []
    it = write_replicas(iter([replicas(0, 3), findings(1), replicas(10, 3), disk("ok")]), path)
    assert next(it).column("table")[0].as_py() == "findings"
    assert any(n.startswith(".") for n in folder_names(tmp_path))   # hidden while it is written
    it.close()
    assert folder_names(tmp_path) == []


def test_the_driver_removes_what_a_killed_task_left_half_written(tmp_path, monkeypatch):
    monkeypatch.setattr(replica_files, "ROW_GROUP_ROWS", 2)
    it = write_replicas(iter([replicas(0, 3), findings(1), disk("ok")]), replica_file(str(tmp_path), 4))
    next(it)   # the file is being written under its temporary name, as when the process is killed
    left = os.path.basename(temporary_name(replica_file(str(tmp_path), 4)))
    assert folder_names(tmp_path) == [left]
    pq.write_table(split_tables([replicas(0, 2)])["replicas"], replica_file(str(tmp_path), 1))
    assert remove_unfinished(str(tmp_path)) == [left]
    assert folder_names(tmp_path) == ["disk-00001.parquet"]
    it.close()
