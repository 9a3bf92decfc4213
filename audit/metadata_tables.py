"""Ledger metadata as distributed data: the metadata stage's tasks read the source's chunks in
parallel and write, each for its own chunk, three kinds of Parquet file under a scratch folder:

- ``segments/``: one row per ensemble that may hold entries (``SEGMENT_ARROW``), which Spark
  reads as the segments frame of the fault tables' joins;
- ``known/``: the keys of the ledgers with no such ensemble (closed and empty), which the orphans
  table reads beside the segments' keys as the ledgers metadata knows;
- ``near/<bookie>/``: per bookie, the ledgers whose metadata places entries on it, pickled, which
  the task scanning that bookie's disk reads for fsck's checks (``bookie_metadata``).

No process holds every ledger: a task holds one chunk, a disk's task one bookie's ledgers, the
driver the chunk paths, the counts and the bookie names.
"""
from __future__ import annotations

import os
import pickle
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bkdisk.audit.arrow_no_pandas import arrow_without_pandas
from bkdisk.audit.errors import AuditError, first_line
from bkdisk.audit.metadata_source import ClosedEmpty, MetadataSource, read_chunk, write_chunks
from bkdisk.bookie.metadata_dir import MetadataView, places_entries_on
from bkdisk.bookie.near_ledgers import NearLedgers
from bkdisk.formats.ids import LedgerId, to_signed64

if TYPE_CHECKING:
    from bkdisk.formats.ledger_metadata import LedgerMetadata

SEGMENT_ARROW = pa.schema([("ledger_scope", pa.int64()), ("ledger_id", pa.int64()), ("state", pa.string()),
                           ("closed_last", pa.int64()), ("write_quorum", pa.int32()), ("seg_first", pa.int64()),
                           ("seg_next", pa.int64()), ("members", pa.list_(pa.string()))])
KNOWN_ARROW = pa.schema([("ledger_scope", pa.int64()), ("ledger_id", pa.int64())])
NEAR_ARROW = pa.schema([("ledger_scope", pa.int64()), ("ledger_id", pa.int64()), ("metadata", pa.binary())])
FLUSH = 20_000   # ledgers buffered by a metadata task between Parquet files


@dataclass(frozen=True)
class MetadataTables:
    segments_dir: str
    near_dir: str
    known_dir: str
    ledgers: int
    bookies: tuple[str, ...]   # every bookie some ensemble names


def bookie_folder(near_dir: str, bookie: str) -> str:
    return os.path.join(near_dir, quote(bookie, safe=""))


def _write(table: pa.Table, path: str) -> None:
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)   # a retried task rewrites the same names: no file is counted twice


def read_chunk_task(source: MetadataSource, index: int, chunk: str, segments_dir: str, near_dir: str,
                    known_dir: str) -> dict:
    """A metadata task: the chunk's ledgers as segment rows, known keys and per-bookie pickles;
    returns counts, the bookies named and the first errors.

    A CLOSED ledger's ensembles that start past its last entry place no entry: they get no segment
    row (every join drops them: their last expected entry is before their first). A ledger left with
    no row (closed and empty) is written to ``known_dir`` as its
    key only, so that its copies on a disk are not orphans; its ensembles' bookies are still named.
    The source finds such ledgers without building their metadata (``read_batches``); the
    rest are read and parsed one by one."""
    arrow_without_pandas()   # the Python worker's: the disk tasks it runs later then fork without it too
    cols: dict[str, list] = {f.name: [] for f in SEGMENT_ARROW}
    known: dict[str, list[int]] = {f.name: [] for f in KNOWN_ARROW}
    near: dict[str, list[tuple[int, int, bytes]]] = defaultdict(list)
    found: list[ClosedEmpty] = []   # the source's batches of closed, empty ledgers (keys only)
    bookies: set[str] = set()
    errors: list[str] = []
    n_err = n = part = 0

    def flush() -> None:
        nonlocal part, cols, known
        name = f"part-{index:06d}-{part:03d}.parquet"
        if cols["ledger_id"]:
            _write(pa.table(cols, schema=SEGMENT_ARROW), os.path.join(segments_dir, name))
        if known["ledger_id"] or found:
            os.makedirs(known_dir, exist_ok=True)
            keys = {k: np.concatenate([np.asarray(known[k], np.int64)] + [getattr(f, attr) for f in found])
                    for k, attr in (("ledger_scope", "scopes"), ("ledger_id", "ledgers"))}
            _write(pa.table(keys, schema=KNOWN_ARROW), os.path.join(known_dir, name))
        for b, rows in near.items():
            d = bookie_folder(near_dir, b)
            os.makedirs(d, exist_ok=True)
            sc, lg, md = zip(*rows)
            _write(pa.table({"ledger_scope": sc, "ledger_id": lg, "metadata": md}, schema=NEAR_ARROW),
                   os.path.join(d, name))
        cols = {f.name: [] for f in SEGMENT_ARROW}
        known = {f.name: [] for f in KNOWN_ARROW}
        found.clear()
        near.clear()
        part += 1

    def add(lid: LedgerId, m: LedgerMetadata) -> None:
        scope, ledger = to_signed64(lid.scope), to_signed64(lid.ledger)
        ens = sorted(m.ensembles)
        closed_last = m.effective_last_entry_id if m.is_closed else None
        placing: set[str] = set()   # the members of the ensembles that get a row
        for i, (first, members) in enumerate(ens):
            if closed_last is not None and first > closed_last:
                break
            for k, v in (("ledger_scope", scope), ("ledger_id", ledger), ("state", m.state),
                         ("closed_last", closed_last), ("write_quorum", m.write_quorum), ("seg_first", first),
                         ("seg_next", ens[i + 1][0] if i + 1 < len(ens) else None), ("members", list(members))):
                cols[k].append(v)
            placing.update(members)
        if not placing:
            known["ledger_scope"].append(scope)
            known["ledger_id"].append(ledger)
        for _first, members in ens:
            bookies.update(members)
        blob = None
        for b in placing:
            if places_entries_on(m, b):
                blob = blob or pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL)
                near[b].append((scope, ledger, blob))

    pending = 0
    for batch, reads in source.read_batches(read_chunk(chunk)):
        if len(batch.ledgers):
            found.append(batch)
            n += len(batch.ledgers)
            pending += len(batch.ledgers)
        bookies.update(batch.bookies)
        for lid, m in reads:
            if isinstance(m, Exception):
                n_err += 1
                if len(errors) < 3:
                    errors.append(str(m).splitlines()[0] if str(m) else type(m).__name__)
                continue
            n += 1
            add(lid, m)
            pending += 1
            if pending >= FLUSH:
                flush()
                pending = 0
    flush()
    return {"ledgers": n, "errors": n_err, "first_errors": errors, "bookies": sorted(bookies)}


def read_metadata(spark, source: MetadataSource, scratch: str) -> MetadataTables:
    """Run the metadata stage (one task per chunk); raise the first unreadable ledger's error: a
    ledger whose metadata cannot be read would be reported as an orphan."""
    chunks = write_chunks(source, os.path.join(scratch, "chunks"))
    seg, near, known = (os.path.join(scratch, d) for d in ("segments", "near", "known"))
    for d in (seg, near, known):
        os.makedirs(d, exist_ok=True)
    stats: list[dict] = []
    if chunks:
        rdd = spark.sparkContext.parallelize(list(enumerate(chunks)), len(chunks))
        try:
            stats = rdd.map(lambda ic: read_chunk_task(source, ic[0], ic[1], seg, near, known)).collect()
        except Exception as e:   # noqa: BLE001 - Py4J and PySpark errors: one line, not a JVM stack
            raise AuditError(f"the metadata stage failed ({source.describe()}): {first_line(e)}") from None
    bad = [e for s in stats for e in s["first_errors"]]
    if bad:
        n = sum(s["errors"] for s in stats)
        raise AuditError(f"{bad[0]}" + (f" (and {n - 1} more ledgers whose metadata cannot be read)" if n > 1 else ""))
    for d, schema in ((seg, SEGMENT_ARROW), (known, KNOWN_ARROW)):
        if not any(n.endswith(".parquet") for n in os.listdir(d)):   # no ledger: the frame still has its columns
            _write(schema.empty_table(), os.path.join(d, "empty.parquet"))
    return MetadataTables(seg, near, known, sum(s["ledgers"] for s in stats),
                          tuple(sorted({b for s in stats for b in s["bookies"]})))


def segments(spark, mt: MetadataTables):
    """The segments frame, read from the metadata stage's files."""
    from pyspark.sql.pandas.types import from_arrow_schema  # the optional extra 'audit': only where Spark runs
    return spark.read.schema(from_arrow_schema(SEGMENT_ARROW)).parquet(mt.segments_dir)


def known_keys(spark, mt: MetadataTables):
    """The keys of the ledgers metadata knows that have no segment row."""
    from pyspark.sql.pandas.types import from_arrow_schema
    return spark.read.schema(from_arrow_schema(KNOWN_ARROW)).parquet(mt.known_dir)


def bookie_metadata(near_dir: str, bookie: str, source: MetadataSource):
    """In a disk's task: the ledgers that place entries on ``bookie``, any other looked up in the source."""
    near = NearLedgers()
    d = bookie_folder(near_dir, bookie)
    names = sorted(n for n in os.listdir(d) if n.endswith(".parquet") and not n.startswith(".")) \
        if os.path.isdir(d) else []
    for n in names:
        t = pq.read_table(os.path.join(d, n))
        for sc, lg, blob in zip(t["ledger_scope"].to_pylist(), t["ledger_id"].to_pylist(),
                                t["metadata"].to_pylist(), strict=True):
            near.add(LedgerId(sc & 0xFFFF_FFFF_FFFF_FFFF, lg & 0xFFFF_FFFF_FFFF_FFFF), pickle.loads(blob))
    return MetadataView(near, source.lookup)
