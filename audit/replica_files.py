"""A scan task's replicas, written by the task itself as its disk's file of the ``replicas`` table.

The replicas are nearly all of a disk's rows (one per entry copy: 65,000 per GiB of 16 KiB entries).
Handed to Spark as Arrow rows, every one would be ingested and cached by the JVM, then read, sorted
and written again, on the same cores that scan. Written by the task (one Parquet file per disk,
straight into ``OUT/replicas/``), the table is in place when the scans end, and the joins read back
only the columns they use. The findings and the disk's row go to Spark as rows.

A disk's file appears only when its scan ended with the disk audited (``ok`` or ``errors``: its row
comes last): it is written under a hidden name (skipped by Spark and pyarrow readers) and renamed
into place, so a disk that ends ``not_audited`` (a scan that raised or died) leaves no copies to be
counted, and a retried task replaces its file whole.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from bkdisk.audit.rows import AUDITED, batch_table, table_schema

# Rows gathered into one Parquet row group (at least this many, but the file's last): an entry log
# gives a batch of a few thousand rows, and a row group of each would slow the joins' reads.
ROW_GROUP_ROWS = 1 << 17


def replica_file(folder: str, index: int) -> str:
    """The replicas file of the ``index``-th disk given to the audit."""
    return os.path.join(folder, f"disk-{index:05d}.parquet")


def temporary_name(path: str) -> str:
    """Where ``write_replicas`` writes ``path`` until it publishes it (hidden: readers skip it)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}.tmp")


def remove_unfinished(folder: str) -> list[str]:
    """Remove the temporary files of tasks whose process was killed outright (the scans are over);
    returns their names."""
    gone = [n for n in os.listdir(folder) if n.startswith(".disk-") and n.endswith(".tmp")]
    for n in gone:
        os.unlink(os.path.join(folder, n))
    return gone


def write_replicas(batches: Iterator[pa.RecordBatch], path: str) -> Iterator[pa.RecordBatch]:
    """Pass on the task's batches (``audit.rows.iter_disk``) but its replicas, which go into ``path``,
    published when the disk's row, passed on last, says it was audited (otherwise ``path`` is removed)."""
    schema = table_schema("replicas")
    tmp = temporary_name(path)
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = []
    disk_rows: list[pa.RecordBatch] = []

    def flush() -> None:
        nonlocal writer
        if writer is None:
            writer = pq.ParquetWriter(tmp, schema)
        rows = pa.Table.from_batches(pending, schema)
        writer.write_table(rows, row_group_size=rows.num_rows)
        pending.clear()

    try:
        for b in batches:
            table = batch_table(b)
            if table == "replicas":
                pending.append(pa.RecordBatch.from_arrays([b.column(n) for n in schema.names], schema=schema))
                if sum(p.num_rows for p in pending) >= ROW_GROUP_ROWS:
                    flush()
            elif table == "disks":
                disk_rows.append(b)
            else:
                yield b
        audited = bool(disk_rows) and disk_rows[-1].column("status")[-1].as_py() in AUDITED
        if audited and pending:
            flush()
        if writer is not None:
            writer.close()
            writer = None
        if audited and os.path.exists(tmp):
            os.replace(tmp, path)
        elif os.path.exists(path):   # an earlier attempt of this task published it
            os.unlink(path)
    finally:
        if writer is not None:
            writer.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
    yield from disk_rows
