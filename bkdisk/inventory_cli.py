"""``bkdisk inventory``: every entry in a bookie's entry logs, as JSON lines or a summary.

Each ROOT is a folder holding bookies' dirs (found by bookie.layout.discover_all, one or several); ``--conf`` reads
the dirs of a bk_server.conf instead. ``--metadata-dir`` points at ledger metadata files
(``<hex ledger id>.bin`` / ``.txt``, BookKeeper's LedgerMetadataSerDe formats) that give each
ledger's digest type and password; ledgers without metadata have their digest type sniffed
(CRC32C, CRC32; HMAC only with a known password), and ``digest_ok`` is null when it stays unknown and
for a DUMMY entry, which carries no digest (both counted unverifiable).
Framing damage and header or ledgers-map errors are reported on stderr as warnings, one line each;
the scan goes on past them (entrylogs/scan.py resyncs after damage).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from bkdisk.bookie.layout import BookieDirs, bookie_id_of, discover_all, from_conf
from bkdisk.commandline.exit_codes import EXIT_UNCORRECTED
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.ledger_options import ledger_options
from bkdisk.commandline.memory_options import memory_options
from bkdisk.commandline.output import warn
from bkdisk.commandline.output_files import refuse_not_utf8, refuse_output_file
from bkdisk.commandline.runner import one_line_errors
from bkdisk.diskio.config import collector_eased, freeze_loaded
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import parse_journal_name

if TYPE_CHECKING:
    from bkdisk.bookie.inventory import LogRows
    from bkdisk.digests.plan import DigestPlan

# The scanners (numpy, numba), pyarrow and the metadata formats (protobuf) load when the command runs,
# not for its --help or a wrong path.
bookie_inventory = lazy_import("bkdisk.bookie.inventory")
distinct_ids = lazy_import("bkdisk.diskio.distinct")
entrylog_arrays = lazy_import("bkdisk.entrylogs.arrays")
np = lazy_import("numpy")
pa = lazy_import("pyarrow")
# Standard modules only writing Parquet needs (concurrent.futures loads logging: milliseconds of --help).
base64 = lazy_import("base64")
futures = lazy_import("concurrent.futures")
digest_kernels = lazy_import("bkdisk.digests.kernels")
digest_plans = lazy_import("bkdisk.digests.plan")
metadata_dir_reader = lazy_import("bkdisk.bookie.metadata_dir")
mapped = lazy_import("bkdisk.diskio.mapped")
pq = lazy_import("pyarrow.parquet")
arrow_columns = lazy_import("bkdisk.bookie.arrow_columns")
WINDOW_DEFAULT = 64 << 20   # entrylogs.scan.DEFAULT_WINDOW (tests hold the two equal)
ROW_GROUP = 1 << 18         # rows of a Parquet row group: the writer holds one encoded group at a time
# Rows the writer takes in at a time. The statistics of a dictionary column are worked out once per
# such part (the distinct indices, then their values), so that at pyarrow's default of 1,024 rows
# they are a large share of writing the string columns.
WRITE_BATCH = 1 << 16
# Columns whose values hardly repeat: a dictionary page for them is built, overflows and is dropped
# again in every row group (no smaller file for the time it takes).
DISTINCT_COLUMNS = frozenset({"offset", "lac", "length"})
# Integer columns stored as deltas: offsets and ledger lengths grow, sizes vary within a small range,
# so their deltas take few bits (smaller pages, written faster than plain pages or a dictionary).
DELTA_COLUMNS = frozenset({"offset", "length", "size", "payload_len"})


class InventoryError(BkdiskError):
    """The inventory could not be started (no bookie given, an unreadable metadata folder)."""


@dataclass
class BookieSummary:
    bookie_id: str | None
    logs: int = 0
    entries: int = 0
    ledgers: dict = field(default_factory=dict)   # scope -> distinct ledger ids merged so far, sorted uint64
    _more: dict = field(default_factory=dict, repr=False)   # scope -> distinct ids of parts not merged in yet
    ok: int = 0
    bad: int = 0
    unknown: int = 0
    problems: int = 0
    warnings: int = 0   # damage said on stderr: framing, a log's header or ledgers map, a dir not listed

    def add_ledgers(self, entries) -> None:
        """Take in the ledgers of ``entries`` (ENTRY_DTYPE rows) as sorted id arrays, a scope at a time."""
        distinct, distinct_ledgers = distinct_ids.distinct, entrylog_arrays.distinct_ledgers
        scope, ledger = entries["scope"], entries["ledger"]
        scopes = distinct(scope).tolist() if (scope != scope[0]).any() else [int(scope[0])]
        for sc in scopes:
            more = self._more.setdefault(sc, [])
            more.append(distinct_ledgers(ledger if len(scopes) == 1 else ledger[scope == sc]))
            # Merged once the parts waiting hold as many ids as the merged ones: each id is sorted again
            # a bounded number of times, however many parts a bookie of millions of ledgers has.
            if sum(len(ids) for ids in more) >= len(self.ledgers.get(sc, ())):
                self._merge(sc)

    def _merge(self, sc: int) -> None:
        held = self.ledgers.get(sc)
        parts = ([] if held is None else [held]) + self._more.pop(sc, [])
        self.ledgers[sc] = distinct_ids.distinct(np.concatenate(parts))

    def ledger_count(self) -> int:
        for sc in list(self._more):
            self._merge(sc)
        return sum(len(ids) for ids in self.ledgers.values())


def inventory_bookie(dirs: BookieDirs, plan: DigestPlan, out, *, jsonl: bool, payload_hash: str | None,
                     window: int = WINDOW_DEFAULT, parquet=None, ledger: LedgerId | None = None,
                     memory: MemoryLimit | None = None) -> BookieSummary:
    """Scan every entry log of one bookie; write its rows as JSON Lines to ``out`` and/or to a Parquet writer.
    A log's rows come a Parquet row group at a time, what does not fit in memory spilled to the
    ``--tmp-dir`` (removed at the end)."""
    memory = memory or MemoryLimit()
    with SpillFolder(memory, dirs.all_dirs) as spill:
        return _inventory(dirs, plan, out, jsonl=jsonl, payload_hash=payload_hash, window=window, parquet=parquet,
                          ledger=ledger, memory=memory, spill=spill)


def _inventory(dirs: BookieDirs, plan: DigestPlan, out, *, jsonl: bool, payload_hash: str | None, window: int,
               parquet, ledger: LedgerId | None, memory: MemoryLimit, spill: SpillFolder) -> BookieSummary:
    summary: BookieSummary | None = None
    unlisted = 0
    for item in bookie_inventory.scan_bookie(dirs, plan, payload_hash=payload_hash, window=window,
                                             meanwhile=None if parquet is None else parquet.prepare,
                                             memory_bytes=memory.bytes, spill=spill, rows=ROW_GROUP):
        if isinstance(item, str):
            warn(item)
            unlisted += 1
            continue
        rows: LogRows = item if ledger is None else item.only(ledger.scope, ledger.ledger)
        if summary is None:
            summary = BookieSummary(rows.bookie_id)
        for w in rows.warnings:
            warn(w)
        summary.warnings += len(rows.warnings)
        summary.logs += rows.first
        summary.problems += rows.problems
        n = len(rows)
        if n == 0:
            continue
        st = bookie_inventory.verified_status(rows.digests)
        ok, bad = int((st == digest_kernels.DIGEST_OK).sum()), int((st == digest_kernels.DIGEST_BAD).sum())
        summary.entries += n
        summary.ok, summary.bad, summary.unknown = summary.ok + ok, summary.bad + bad, summary.unknown + n - ok - bad
        if jsonl:
            rows.write_jsonl(out)
        if parquet is not None:
            parquet.write(rows)
        if not jsonl:
            summary.add_ledgers(rows.entries)
    if summary is None:
        summary = BookieSummary(bookie_id_of(dirs))
        if not unlisted and dirs.ledger_dirs:
            # A bookie that ever ran has an entry log (it makes one at start): none at all is a loss.
            warn(f"{', '.join(dirs.ledger_dirs)}: no entry log in any ledger dir (every entry this bookie "
                  f"stored is gone, or it never started)")
            summary.warnings += 1
    summary.warnings += unlisted
    for gap in _unserved(dirs, summary.entries):
        warn(gap)
        summary.warnings += 1
    return summary


def _unserved(dirs: BookieDirs, entries: int) -> list[str]:
    """What the listed entries lack to be served, told from the dirs alone: no index to find them by,
    no journal (a bookie writes one from its first start; without it, entries acknowledged but not yet
    flushed to an entry log are gone)."""
    gaps = []
    if entries and dirs.storage_kind == "empty":
        gaps.append(f"{', '.join(dirs.effective_index_dirs)}: no index (no .idx file, no DbLedgerStorage "
                    f"ledgers and locations databases) for the {entries} entries the entry logs hold: "
                    f"the bookie cannot find them to serve them")
    journals = 0
    unlisted = []
    for d in dirs.journal_dirs:
        try:
            journals += sum(parse_journal_name(n) is not None for n in os.listdir(dirs.current(d)))
        except (FileNotFoundError, NotADirectoryError):
            pass   # (no current folder: no journal)
        except OSError as e:
            unlisted.append(f"{dirs.current(d)}: cannot list ({e.strerror}): its journals were not looked for")
    gaps += unlisted
    if dirs.journal_dirs and not journals and not unlisted:
        gaps.append(f"{', '.join(dirs.journal_dirs)}: no journal file in any journal dir (a bookie that "
                    f"ever ran has one): what it acknowledged and had not yet written to an entry log is gone")
    return gaps


class _ParquetSink:
    """Batches of every bookie into one Parquet file, written to a temp name and renamed when complete.

    The string columns come as dictionary arrays (``LogRows.arrow(coded=True)``) and are stored as
    the dictionary pages and indices they are; the file's Arrow schema names them strings, as the
    rows are, so readers get the same columns as from a file written from string columns.

    A row group is written on a thread of its own while the caller builds the next one (pyarrow
    writes without the GIL): the groups are built in two rooms in turn, and a room is built in again
    only once the group built in it is written."""

    def __init__(self, path: str):
        self.path, self.tmp = path, f"{path}.tmp-{os.getpid()}"
        self.writer: Any = None   # a pyarrow ParquetWriter once the first batch gives the schema
        self.rooms: list = []     # the column builders' arrays, kept from one row group to the next
        self.built = 0            # row groups built
        self.thread: Any = None   # the writing thread (an executor of one)
        self.writing: Any = None  # the future of the row group being written
        try:   # an output that cannot be written is said before the scan, in one line
            open(self.tmp, "xb").close()
        except OSError as e:
            raise mapped.DiskError(path, f"cannot write ({e.strerror})") from None

    def prepare(self) -> None:
        """Import what writing needs (pyarrow's Parquet writer, the column builders) and start the writing thread."""
        if not self.rooms:
            _ = pq.ParquetWriter
            self.rooms = [arrow_columns.ColumnRoom(), arrow_columns.ColumnRoom()]
            self.thread = futures.ThreadPoolExecutor(1, thread_name_prefix="parquet-writer")

    def write(self, rows: LogRows) -> None:
        """The rows as row groups of ROW_GROUP rows, each written while the next is built."""
        self.prepare()
        for lo in range(0, len(rows), ROW_GROUP):
            batch = rows.part(lo, lo + ROW_GROUP).arrow(coded=True, room=self.rooms[self.built % 2])
            self.built += 1
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.tmp, batch.schema, store_schema=False,
                                               **parquet_settings(batch.schema.names))
                self.writer.add_key_value_metadata(_arrow_schema(batch.schema))
            elif batch.schema != self.writer.schema:
                batch = batch.cast(self.writer.schema)
            if self.writing is not None:
                self.writing.result()   # the group before, from the other room (its error, if any, here)
            self.writing = self.thread.submit(self.writer.write_batch, batch, row_group_size=ROW_GROUP)

    def close(self, ok: bool) -> None:
        if self.thread is not None:
            self.thread.shutdown(wait=True)   # a group still being written is finished before the file is closed
        error = self.writing.exception() if ok and self.writing is not None else None
        if self.writer is not None:
            self.writer.close()
        if ok and error is None and self.writer is not None:
            os.replace(self.tmp, self.path)
        else:
            os.unlink(self.tmp)
        if error is not None:
            raise error


def parquet_settings(names: list[str]) -> dict:
    """The Parquet writer's settings for the inventory's columns: a dictionary where values repeat,
    delta-coded integers where they grow or vary little from row to row, Snappy pages."""
    delta = {n: "DELTA_BINARY_PACKED" for n in names if n in DELTA_COLUMNS}
    return {"use_dictionary": [n for n in names if n not in DISTINCT_COLUMNS and n not in delta],
            "column_encoding": delta or None, "compression": "snappy", "write_batch_size": WRITE_BATCH}


def _arrow_schema(schema) -> dict[bytes, bytes]:
    """The Arrow schema a file of ``schema``'s rows carries, with each dictionary column as its values'
    type: under the key and in the encoding pyarrow writes it (ARROW:schema, base64 of the IPC schema)."""
    plain = pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type,
                                f.nullable, f.metadata) for f in schema], metadata=schema.metadata)
    return {b"ARROW:schema": base64.b64encode(plain.serialize().to_pybytes())}


@click.command("inventory")
@click.argument("roots", nargs=-1, metavar="ROOT...")
@click.option("--jsonl", is_flag=True, help="One JSON object per entry on stdout (default: a summary per bookie).")
@click.option("--parquet", "parquet_path", default=None, metavar="FILE",
              help="Write the same rows to a Parquet file (the shape `bkdisk scan-disk` and the audit share).")
@click.option("--payload-hash", type=click.Choice(["sha256"]), default=None,
              help="Add each payload's hash (payload_sha256) to the rows of --jsonl / --parquet.")
@click.option("--conf", "conf", default=None, metavar="bk_server.conf",
              help="Take the bookie's dirs from a BookKeeper server config (journalDirectories, "
                   "ledgerDirectories, indexDirectories).")
@click.option("--metadata-dir", default=None, metavar="DIR",
              help="Folder of ledger metadata files (<hex ledger id>.bin/.txt): digest types and passwords.")
@click.option("--window", type=click.IntRange(min=4096), default=WINDOW_DEFAULT, show_default=True, hidden=True,
              help="Bytes of an entry log mapped at once.")
@ledger_options
@memory_options
@one_line_errors
@collector_eased()
def inventory(roots: tuple[str, ...], jsonl: bool, parquet_path: str | None, payload_hash: str | None,
              conf: str | None, metadata_dir: str | None, window: int, ledger: LedgerId | None, memory) -> None:
    """Inventory every entry in the entry logs of the bookies under ROOT... (or of --conf).

    Exit 0 when every entry framed and no digest failed, 4 when a digest failed, framing was broken,
    a log's header or ledgers map is damaged or a dir could not be listed (the rows still list
    everything readable), 8 when the inventory could not run.

    \b
    Examples:
      bkdisk inventory /mnt/bookie1 --jsonl > entries.jsonl
      bkdisk inventory /mnt/bookie1 --parquet entries.parquet --payload-hash sha256
      bkdisk inventory --conf /etc/bookkeeper/bk_server.conf --metadata-dir ./metadata
      bkdisk inventory /mnt/bookie1 --jsonl --ledger-qualified-name 00000000deadbeef0000000000000007
    """
    if not roots and conf is None:
        raise InventoryError("nothing to inventory: give one or more ROOT folders or --conf bk_server.conf")
    if payload_hash and not (jsonl or parquet_path):
        raise click.UsageError("--payload-hash adds a column to the rows: use it with --jsonl or --parquet")
    meta = {}
    if metadata_dir:
        meta, errors = metadata_dir_reader.load_metadata_dir(metadata_dir)
        if errors:
            raise errors[0]
    # A ROOT may hold several bookies (a cluster's disks side by side): each is inventoried on its own.
    notes: list[str] = []   # folders left unsearched below a ROOT that holds bookies: said, not counted as damage
    bookies = [b for r in roots for b in discover_all(r, notes)] + ([from_conf(conf)] if conf else [])
    for note in notes:
        warn(note)
    for dirs in bookies:   # a --tmp-dir in any bookie's dirs is refused before any is read
        SpillFolder(memory, dirs.all_dirs)
    if parquet_path:   # (so is a --parquet there, or one that is no regular file; its rows' paths are text)
        read = [d for b in bookies for d in b.all_dirs]
        for given in [{"--parquet": parquet_path}] + [{"ROOT": d} for d in read]:
            refuse_not_utf8(given)
        refuse_output_file(parquet_path, "--parquet", read)
    out = sys.stdout.buffer
    sink = _ParquetSink(parquet_path) if parquet_path else None
    _load_scanners()
    damaged = False
    done = False
    try:
        for dirs in bookies:
            # Sniffed digest types stay per bookie: ROOTs may come from clusters that reuse ledger ids.
            s = inventory_bookie(dirs, _digest_plan(meta), out, jsonl=jsonl, payload_hash=payload_hash,
                                 window=window, parquet=sink, ledger=ledger, memory=memory)
            damaged |= bool(s.bad or s.warnings)
            _summary_line(dirs, s, jsonl)
        done = True
    finally:
        if sink is not None:
            sink.close(done)
    out.flush()
    if damaged:
        sys.exit(EXIT_UNCORRECTED)


def _load_scanners() -> None:
    """Load the scanners (numpy, numba's kernels), once the arguments are checked, and freeze them out of
    the collector's sight (diskio.config.freeze_loaded): the young collections of the scan would
    otherwise walk their hundred thousand objects, on the thread the rows wait for."""
    bookie_inventory.scan_bookie, digest_plans.DigestPlan   # noqa: B018 - read to load the modules
    freeze_loaded()


def _digest_plan(meta: dict) -> DigestPlan:
    if not meta:
        return digest_plans.DigestPlan()   # what digest_plan({}) gives, without importing the metadata formats
    return metadata_dir_reader.digest_plan(meta)


def _summary_line(dirs: BookieDirs, s: BookieSummary, jsonl: bool) -> None:
    if jsonl:
        return
    where = dirs.root or dirs.conf_path
    click.echo(f"{where}: bookie {s.bookie_id or '?'}: {s.entries} entries in {s.ledger_count()} ledgers, "
               f"{s.logs} entry logs; digests ok {s.ok}, bad {s.bad}, unverifiable {s.unknown}; "
               f"framing problems {s.problems}")
