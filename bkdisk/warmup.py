"""``bkdisk warm-up``: compile every jitted kernel into numba's cache once, so no command pays for it later.

Run by `./dev setup` after an install; packagers run it after installing into a read-only location
with NUMBA_CACHE_DIR (or BKDISK_NUMBA_CACHE_DIR) pointing at a writable cache. It writes a small
sample bookie into a temporary folder and runs what the commands run over it: every scanner with
every digest type, entry formats V1 and V2, the index walk, fsck's passes and the inventory encoder.
It also writes the bytecode of the project's own modules: an editable install (or an environment
with PYTHONDONTWRITEBYTECODE set, common in containers) leaves none, and every command would then
compile its modules from source again.
"""
from __future__ import annotations

import compileall
import importlib.util
import os
import tempfile
import time
from contextlib import ExitStack

import click

from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.runner import one_line_errors

# The project's packages as installed (pyproject.toml's package-dir; a test keeps the two equal), and
# the benchmarks, which only a checkout has.
PACKAGES = ("bkdisk", "bkdisk.formats", "bkdisk.diskio", "bkdisk.digests", "bkdisk.journal", "bkdisk.indexfiles",
            "bkdisk.entrylogs", "bkdisk.rocksdbfiles", "bkdisk.bookie", "bkdisk.fsck", "bkdisk.commandline",
            "bkdisk.audit", "bkdisk.metaservice", "bench")

# What the warm-up runs loads when it runs, not for `bkdisk warm-up --help`.
demo = lazy_import("bkdisk.demo")
locations_text = lazy_import("bkdisk.dump.locations_text")
bookie_inventory = lazy_import("bkdisk.bookie.inventory")
layout = lazy_import("bkdisk.bookie.layout")
metadata_dir = lazy_import("bkdisk.bookie.metadata_dir")
writer = lazy_import("bkdisk.bookie.writer")
fsck_api = lazy_import("bkdisk.fsck.api")
journal_search = lazy_import("bkdisk.journal.search")
fsck_context = lazy_import("bkdisk.fsck.context")
ensemble_placement = lazy_import("bkdisk.fsck.ensemble_placement")
crc_kernels = lazy_import("bkdisk.digests.crc_kernels")
ledger_copies = lazy_import("bkdisk.bookie.ledger_copies")
ledger_read = lazy_import("bkdisk.bookie.ledger_read")
diskio_config = lazy_import("bkdisk.diskio.config")
dbledger = lazy_import("bkdisk.formats.dbledger")
rocksdb_format = lazy_import("bkdisk.formats.rocksdb")
dbindex = lazy_import("bkdisk.rocksdbfiles.dbindex")
sst = lazy_import("bkdisk.rocksdbfiles.sst")
rocksdb_writer = lazy_import("bkdisk.rocksdbfiles.writer")
np = lazy_import("numpy")
diskio_kernels = lazy_import("bkdisk.diskio.kernels")
entrylog_arrays = lazy_import("bkdisk.entrylogs.arrays")
index_arrays = lazy_import("bkdisk.indexfiles.arrays")
location_ranges = lazy_import("bkdisk.fsck.passes.p5_crosscheck.location_ranges")
range_join = lazy_import("bkdisk.fsck.passes.p5_crosscheck.range_join")
map_sums = lazy_import("bkdisk.entrylogs.map_sums")
index_listing = lazy_import("bkdisk.indexfiles.listing")
index_scan = lazy_import("bkdisk.indexfiles.scan")
# The audit's modules, for the driver's class archive (only where pyspark, the extra 'audit', is installed).
jvm_archive = lazy_import("bkdisk.audit.jvm_archive")
audit_cli = lazy_import("bkdisk.audit.cli")
audit_errors = lazy_import("bkdisk.audit.errors")
audit_job = lazy_import("bkdisk.audit.job")
audit_rows = lazy_import("bkdisk.audit.rows")
spark_logging = lazy_import("bkdisk.audit.spark_logging")


def warm_up(spark: bool = True) -> tuple[float, str | None]:
    """Run every kernel once on a sample bookie, and (``spark``) an audit of it that writes the audit
    driver's class archive; returns the seconds the kernels took and what became of the archive."""
    check_bookie, CheckOptions = fsck_api.check_bookie, fsck_context.CheckOptions
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bkdisk-warm-up-") as d:
        spec = demo.sample_spec()
        root, md = os.path.join(d, "bookie"), os.path.join(d, "metadata")
        written = writer.write_bookie(spec, root)
        writer.write_metadata_dir(spec, md)
        dirs = layout.discover(root)
        check_bookie(dirs, CheckOptions(metadata_dir=md))
        check_bookie(dirs, CheckOptions())                       # sniffing paths, no metadata
        _warm_placement()                                        # ensembles of several bookies
        _warm_streamed()                                         # a record larger than a window
        _warm_ranges()                                           # a check larger than its memory share
        _warm_join()                                             # a log joined in parts, one of one entry
        _warm_map_sums()                                         # a log of one entry against its ledgers map
        _warm_listed_reads(dirs.effective_index_dirs)           # index files read in a listing's order
        _warm_rocksdb(os.path.join(d, "rocksdb"))                # DbLedgerStorage's block decoder
        journal_search.find_record_pair(written.journal_files[0], 1)   # a torn journal's search for records
        meta, _errors = metadata_dir.load_metadata_dir(md)
        _warm_read_ledger(root, meta)                            # `bkdisk read-ledger`
        for hashed in (None, "sha256"):
            for rows in bookie_inventory.scan_bookie(dirs, metadata_dir.digest_plan(meta), payload_hash=hashed):
                if not isinstance(rows, str):
                    rows.jsonl()
        _warm_damaged(written)                                   # last: it damages the sample bookie
        seconds = time.perf_counter() - t0   # (the kernels' time: the archive's audit is told apart)
        archive = _warm_spark(root, md, os.path.join(d, "audit")) if spark else None
    return seconds, archive


def _warm_spark(root: str, md: str, out: str) -> str | None:
    """An audit of the sample bookie, its driver JVM writing the classes it loaded into the archive
    later audits start from (audit/jvm_archive.py); None without pyspark (the optional extra
    'audit'), or a line saying why there is no archive."""
    if importlib.util.find_spec("pyspark") is None:
        return None

    def audit(options: str) -> None:
        audit_cli.run_audit_command([audit_rows.DiskInput(root)], [], md, out, "local[1]",
                                    {spark_logging.DRIVER_JAVA_OPTIONS: options}, None, quiet=True)
    try:
        path = jvm_archive.write_archive(audit, audit_job.DRIVER_JVM_OPTIONS)
    except Exception as e:   # noqa: BLE001 - no java, no room: the audits start without the archive
        return f"no class archive for the audit's driver (its JVM starts slower): {audit_errors.first_line(e)}"
    return f"Spark's classes archived for the audit's driver: {path}"


def compile_bytecode() -> bool:
    """Write the ``.pyc`` of every module of the project beside its source, as pip does for a wheel
    (py_compile writes them even where PYTHONDONTWRITEBYTECODE is set). False when some folder was
    not writable (a read-only install): its modules are then compiled on each import."""
    ok = True
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            ok = compileall.compile_dir(folder, quiet=2) and ok
    return ok


def _warm_placement() -> None:
    """Pass 7's count of the entries a ledger's ensembles place on the bookie and of those it holds, which
    the check takes for a ledger striped over several bookies (the sample's ledgers have one)."""
    one = np.zeros(1, np.int64)
    placed = ensemble_placement.Placement(one, one + 1, one, one + 1, one, one + 1, np.ones(1, bool))
    placed.wanted(one, one)
    placed.held(one, np.array([0, 1]), one, one)


def _warm_read_ledger(root: str, meta: dict) -> None:
    """`bkdisk read-ledger` of a sample ledger: the copies of a chunk of entries framed and verified at once."""
    lid = next(iter(meta))
    for _entry in ledger_read.read_ledger([ledger_copies.open_disk(root)], lid, meta[lid]):
        pass


def _warm_streamed() -> None:
    """The CRC of a record too large for a window, read in chunks (digests.verify.verify_streamed): the
    register a uint64, the chunk the read-only bytes of a read, offsets and lengths Python ints."""
    chunk = np.frombuffer(bytes(64), np.uint8)
    crc_kernels.crc_update(np.uint64(0xFFFFFFFF), chunk, 0, len(chunk), crc_kernels.POLY_CRC32C,
                           diskio_config.crc_variant())


def _warm_damaged(written) -> None:
    """A check of the sample bookie with an entry log cut mid-entry and a journal record's length
    damaged: the walks' paths past damage (the zeros at a log's end, the search for records after a
    journal's damaged length)."""
    log = written.entry_log_files[0]
    os.truncate(log, os.path.getsize(log) - 100)
    with open(written.journal_files[0], "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\x7f\xff\xff\x00")
    fsck_api.check_bookie(layout.discover(written.root), fsck_context.CheckOptions())
    # Where a journal's last record may stand after a damaged length (before a lone fence record): small
    # windows, so that records cross them (a record's successor read past its window).
    for _at in journal_search.lone_records(written.journal_files[0], 0, window=64):
        pass


def _warm_listed_reads(index_dirs: list[str]) -> None:
    """The reading of index files listed before (a command's listing, made by a process of its own): the
    jitted loop that reads runs of small files into the reader's batch."""
    index_scan.walk_index_dirs(index_dirs, listing=index_listing.list_index_tree(index_dirs))


def _warm_ranges() -> None:
    """RangeSpill's grouping of rows by range, which a check takes only when its rows need more than
    one range (a bookie larger than the memory share): the sample bookie needs one."""
    diskio_kernels.stable_partition(np.zeros(1, np.int64), 2, np.empty(1, np.int64), np.empty(3, np.int64))


def _warm_join() -> None:
    """Pass 5's join of a log read in parts: a part of one entry and one of two; entry 0's location is found
    by its ids, entries 1 and 2 point 4 bytes short of theirs and are looked up by position, grouped by
    where they point (the entries are over 64 KiB apart); then the same range as one table, as a range
    whose logs cannot be joined one by one is (here one log id twice, as two ledger dirs' logs can be)."""
    e = np.zeros(3, entrylog_arrays.ENTRY_DTYPE)
    e["offset"], e["entry"] = [1024, 70000, 140000], [0, 1, 2]
    log = entrylog_arrays.EntryLogArrays("0.log", 0, 150000, None, None, None, None, 150000, e,
                                         np.zeros(0, entrylog_arrays.PROBLEM_DTYPE))
    lr = np.zeros(3, location_ranges.LOCATION_ROW)   # in index order: looked up by ids, then by position
    lr["key"], lr["entry"] = [1028, 70000, 140000], [0, 1, 2]
    index_rows = np.zeros(2, index_arrays.INDEX_FILE_DTYPE)
    index_rows["ledger"] = [0, 1]   # (two file rows of one ledger would leave the lookup by ids out)
    range_join.join_range(index_rows, [(0, log)], lr, rows=2)   # parts of two entries and one
    range_join.join_range(index_rows, [(0, log), (0, log)], lr)


def _warm_map_sums() -> None:
    """Pass 4's count of a log's entries into its ledgers map's rows for a log (or a part) of one
    entry: its columns numba types as contiguous, another variant than a longer log's."""
    e = np.zeros(1, entrylog_arrays.ENTRY_DTYPE)
    log = entrylog_arrays.EntryLogArrays("0.log", 0, 2048, None, None, None, None, 2048, e,
                                         np.zeros(0, entrylog_arrays.PROBLEM_DTYPE))
    map_sums.MapCounter(np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.int64)).add_parts(log)


def _warm_rocksdb(folder: str) -> None:
    """Read a small ``locations`` database (written by the test writer) as fsck does, and list it as `bkdisk dump
    locations` does: the jitted block walk, merge and listing."""
    write_db, Record, VALUE = rocksdb_writer.write_db, sst.Record, rocksdb_format.ValueType.VALUE
    location_value, locations_key = dbledger.location_value, dbledger.locations_key
    write_db(folder, [(1, [Record(locations_key(1, e), 1 + e, VALUE, location_value(0, 1028 + 64 * e))
                           for e in range(64)])])
    ledgers = folder + "-ledgers"
    info = dbledger.ledger_value(dbledger.LedgerInfo(1, True, False, bytes(20), None, None))
    write_db(ledgers, [(1, [Record(dbledger.LEDGERS_KEY.build(1), 1, VALUE, info)])])
    with ExitStack() as stack:
        dbindex.read_ledger_table(ledgers, stack)                # the ledgers index's LedgerData walk
        cols, _problems = dbindex.read_location_columns(folder, stack)
    locations_text.Listing(headers=True).encode(cols)            # `bkdisk dump locations`, text and JSON
    template, columns = locations_text.json_rows(folder)
    template.encode(columns(cols))


@click.command("warm-up")
@click.option("--no-spark", is_flag=True,
              help="Compile the scanners only: start no Spark, write no class archive for the audit's driver.")
@one_line_errors
def warmup(no_spark: bool) -> None:
    """Compile the scanners into numba's cache now (after an install), not on a command's first run."""
    seconds, archive = warm_up(spark=not no_spark)
    click.echo(f"bkdisk: kernels compiled and cached in {seconds:.1f} s")
    if archive:
        click.echo(f"bkdisk: {archive}")
    if not compile_bytecode():
        click.echo("bkdisk: some of the project's folders are not writable: its modules' bytecode was not "
                   "written (commands compile them on each start)", err=True)
