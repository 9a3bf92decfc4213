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

import os
import tempfile
import time

import click

from commandline.runner import one_line_errors

# The project's top-level packages (pyproject.toml's package list; a test keeps the two equal).
PACKAGES = ("formats", "diskio", "journal", "indexfiles", "entrylogs", "rocksdbfiles", "bookie", "fsck", "audit",
            "metaservice", "bkdisk", "bench")


def warm_up() -> float:
    """Run every kernel once on a sample bookie; returns the seconds it took."""
    from bkdisk.demo import sample_spec
    from bookie.inventory import scan_bookie
    from bookie.layout import discover
    from bookie.metadata_dir import digest_plan, load_metadata_dir
    from bookie.writer import write_bookie, write_metadata_dir
    from fsck.api import check_bookie
    from fsck.context import CheckOptions

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bkdisk-warm-up-") as d:
        spec = sample_spec()
        root, md = os.path.join(d, "bookie"), os.path.join(d, "metadata")
        write_bookie(spec, root)
        write_metadata_dir(spec, md)
        dirs = discover(root)
        check_bookie(dirs, CheckOptions(metadata_dir=md))
        check_bookie(dirs, CheckOptions())                       # sniffing paths, no metadata
        _warm_rocksdb(os.path.join(d, "rocksdb"))                # DbLedgerStorage's block decoder
        meta, _errors = load_metadata_dir(md)
        for hashed in (None, "sha256"):
            for rows in scan_bookie(dirs, digest_plan(meta), payload_hash=hashed):
                if not isinstance(rows, str):
                    rows.jsonl()
    return time.perf_counter() - t0


def compile_bytecode() -> bool:
    """Write the ``.pyc`` of every module of the project beside its source, as pip does for a wheel
    (py_compile writes them even where PYTHONDONTWRITEBYTECODE is set). False when some folder was
    not writable (a read-only install): its modules are then compiled on import, as before."""
    import compileall
    import importlib.util
    ok = True
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            ok = compileall.compile_dir(folder, quiet=2) and ok
    return ok


def _warm_rocksdb(folder: str) -> None:
    """Read a small ``locations`` database (written by the test writer) as fsck does, and list it as `bkdisk dump
    locations` does: the jitted block walk, merge and listing."""
    from contextlib import ExitStack
    from formats.dbledger import location_value, locations_key
    from formats.rocksdb import ValueType
    from rocksdbfiles.dbindex import read_location_columns
    from rocksdbfiles.sst import Record
    from rocksdbfiles.writer import write_db
    write_db(folder, [(1, [Record(locations_key(1, e), 1 + e, ValueType.VALUE, location_value(0, 1028 + 64 * e))
                           for e in range(64)])])
    from bkdisk.locations_text import Listing, json_rows
    from formats.dbledger import LEDGERS_KEY, LedgerInfo, ledger_value
    from rocksdbfiles.dbindex import read_ledger_table
    ledgers = folder + "-ledgers"
    write_db(ledgers, [(1, [Record(LEDGERS_KEY.build(1), 1, ValueType.VALUE,
                                   ledger_value(LedgerInfo(1, True, False, bytes(20), None, None)))])])
    with ExitStack() as stack:
        read_ledger_table(ledgers, stack)                        # the ledgers index's LedgerData walk
        cols, _problems = read_location_columns(folder, stack)
    Listing(headers=True).encode(cols)                           # `bkdisk dump locations`, text and JSON
    template, columns = json_rows(folder)
    template.encode(columns(cols))


@click.command("warm-up")
@one_line_errors
def warmup() -> None:
    """Compile the scanners into numba's cache now (after an install), not on a command's first run."""
    seconds = warm_up()
    click.echo(f"bkdisk: kernels compiled and cached in {seconds:.1f} s")
    if not compile_bytecode():
        click.echo("bkdisk: some of the project's folders are not writable: its modules' bytecode was not "
                   "written (commands compile them on each start)", err=True)
