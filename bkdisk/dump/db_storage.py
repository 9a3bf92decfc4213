"""`bkdisk dump rocksdb|locations|ledgers-index`: a DbLedgerStorage bookie's RocksDB files and indexes.

``locations --ledger-id L`` prints what ``bookkeeper shell ledger L`` prints on DbLedgerStorage
(``entry E\\t:\\t(log: G, pos: P)``); without a ledger every ledger follows its ``===== LEDGER`` line.
The RocksDB reader and the listing kernels load when one of these commands runs (commandline.lazy).
"""
from __future__ import annotations

import os
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.ledger_options import ledger_options
from bkdisk.commandline.runner import one_line_errors
from bkdisk.diskio.mapped import map_file
from bkdisk.dump import shell_format as sf
from bkdisk.dump.common import DumpError, Out, json_option
from bkdisk.dump.file_kinds import holds_rocksdb_files
from bkdisk.dump.state import storage_dirs
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, LEDGERS_DB, LOCATIONS_DB

if TYPE_CHECKING:
    from bkdisk.rocksdbfiles.problem import Problem

locations_text = lazy_import("bkdisk.dump.locations_text")
dbindex = lazy_import("bkdisk.rocksdbfiles.dbindex")
rocksdb = lazy_import("bkdisk.rocksdbfiles.db")
sst = lazy_import("bkdisk.rocksdbfiles.sst")


def _databases(path: str, db: str) -> list[str]:
    """The database folders ``db`` under PATH: PATH itself when it is a RocksDB folder (whatever its
    name: a copy, or a database moved aside, reads as `dump rocksdb` reads it), else ``db`` in a
    ``current`` folder, a ledger dir, or the ledger dirs of a bookie root."""
    p = os.path.abspath(path)
    if os.path.isfile(os.path.join(p, "CURRENT")) or holds_rocksdb_files(p):
        return [p]    # a database without CURRENT is read, and named in one line, not taken for a bookie root
    if os.path.isfile(os.path.join(p, db, "CURRENT")):
        return [os.path.join(p, db)]
    out = [os.path.join(d, CURRENT_DIR, db) for d in storage_dirs(p)]
    # Every ledger dir holding the database folder: a damaged one (CURRENT missing or not a file) is
    # read, and fails in one line, rather than left out of the dump.
    return [c for c in out if os.path.lexists(c)]


def _problems_error(problems) -> None:
    if problems:
        p = problems[0]
        raise FormatError(f"an undamaged database ({len(problems)} problem(s); the first: {p.kind})", p.detail,
                          path=p.path, offset=p.offset)


@click.command("locations")
@click.argument("path")
@json_option
@ledger_options
@one_line_errors
def locations_cmd(path: str, as_json: bool, ledger: LedgerId | None) -> None:
    """Entry locations of DbLedgerStorage (`bookkeeper shell ledger <id>` on such a bookie)."""
    dirs = _databases(path, LOCATIONS_DB)
    if not dirs:
        raise DumpError(f"{path}: no DbLedgerStorage locations database (locations/CURRENT) found")
    out = Out()
    problems: list[Problem] = []
    listing = locations_text.Listing(headers=ledger is None)
    with ExitStack() as stack:
        for cur in dirs:
            template, columns = locations_text.json_rows(cur)
            for cols in dbindex.iter_location_columns(cur, stack, problems):
                if ledger is not None:
                    keep = cols["ledger"] == ledger.ledger if ledger.scope == 0 else np.zeros(len(cols["ledger"]), bool)
                    cols = {k: v[keep] for k, v in cols.items()}
                out.raw(template.encode(columns(cols)) if as_json else listing.encode(cols))
    out.flush()
    _problems_error(problems)


@click.command("ledgers-index")
@click.argument("path")
@json_option
@ledger_options
@one_line_errors
def ledgers_index_cmd(path: str, as_json: bool, ledger: LedgerId | None) -> None:
    """The ledgers index of DbLedgerStorage: exists, fenced, master key and explicit LAC per ledger."""
    dirs = _databases(path, LEDGERS_DB)
    if not dirs:
        raise DumpError(f"{path}: no DbLedgerStorage ledgers database (ledgers/CURRENT) found")
    out, problems = Out(), []
    with ExitStack() as stack:
        for cur in dirs:
            infos, probs = dbindex.read_ledgers(cur, stack)
            problems += probs
            for lid, i in sorted(infos.items()):
                if ledger is not None and (ledger.scope != 0 or lid != ledger.ledger):
                    continue
                if as_json:
                    out.obj({"db": cur, "kind": "ledger", "ledger": lid, "exists": i.exists,
                             "fenced": i.fenced, "master_key": i.master_key.hex(), "explicit_lac": i.explicit_lac,
                             "explicit_lac_body": None if i.explicit_lac_body is None else i.explicit_lac_body.hex(),
                             "limbo": i.limbo})
                else:
                    out.text(f"===== LEDGER: {sf.ledger_text(lid)} =====\n"
                             f"master key  : {sf.bytes2hex(i.master_key)}\n"
                             f"exists       : {'true' if i.exists else 'false'}\n"
                             f"isFenced     : {'true' if i.fenced else 'false'}\n"
                             f"explicitLac  : {'N/A' if i.explicit_lac is None else i.explicit_lac}\n")
    out.flush()
    _problems_error(problems)


def _sst_summary(t) -> dict[str, Any]:
    return {"file": t.path, "kind": "sst", "format_version": t.format_version,
            "checksum": t.footer.checksum_type, "compression": t.compression, "entries": t.num_entries(),
            "data_blocks": len(t.index_handles)}


@click.command("rocksdb")
@click.argument("path")
@click.option("--records", is_flag=True, help="Also list the records (merged live keys for a database).")
@json_option
@one_line_errors
def rocksdb_cmd(path: str, records: bool, as_json: bool) -> None:
    """A RocksDB database dir (CURRENT, MANIFEST, SSTs, WAL) or one SST file: structure and checks."""
    out = Out()
    emit = out.obj if as_json else (lambda o: out.text(" ".join(f"{k}={v}" for k, v in o.items()) + "\n"))
    problems = []
    with ExitStack() as stack:
        if os.path.lexists(path) and not os.path.isdir(path):   # one SST file (a FIFO or device is refused)
            t = sst.SstFile(os.path.abspath(path), stack.enter_context(map_file(path)).data)
            emit(_sst_summary(t))
            if records:
                for r in t.records():
                    emit({"kind": "record", "key": r.user_key.hex(), "seq": r.sequence, "type": r.vtype,
                          "value": r.value.hex()})
        else:
            db = rocksdb.open_db(path, stack)
            v = db.version
            emit({"db": db.path, "kind": "manifest", "manifest": os.path.basename(v.manifest),
                  "comparator": v.comparator, "log_number": v.log_number, "next_file_number": v.next_file_number,
                  "last_sequence": v.last_sequence, "deleted_files": len(v.deleted)})
            for level, _n, t in db.tables:
                emit({"level": level, **_sst_summary(t)})
            for wal in db.wals:
                emit({"file": wal.path, "kind": "wal", "batches": len(wal.batches), "last_sequence": wal.last_sequence})
            problems = db.verify()
            for p in problems:
                emit({"kind": "problem", "problem": p.kind, "file": p.path, "offset": p.offset, "detail": p.detail})
            if records:
                for k, val in db.items():
                    emit({"kind": "record", "key": k.hex(), "value": val.hex()})
    out.flush()
    _problems_error(problems)


COMMANDS = {"rocksdb": rocksdb_cmd, "locations": locations_cmd, "ledgers-index": ledgers_index_cmd}
