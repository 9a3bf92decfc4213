"""The scrub state (``--state DIR``): per disk and entry log its identity, its last deep check, its
next one and its verdict, kept from run to run as Parquet (``DIR/logs.parquet``).

A run writes the whole state into a hidden folder beside ``DIR`` and renames it into place at its
end: the old folder is renamed aside, the new one in, the old one removed. A run killed before the
renames leaves the last good state as it was (its half-written folder is removed by the next
write); one killed between them leaves the old folder aside, which ``read_state`` takes.
"""
from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pyarrow.parquet as pq

from bkdisk.audit.scrub_schedule import DiskIdentity, LogState
from bkdisk.diskio.atomic import fsync_dir
from bkdisk.entrylogs.identity import LogIdentity
from bkdisk.formats.errors import BkdiskError

LOGS_FILE = "logs.parquet"
MARKER = ".bkdisk-scrub-state"
NEW_MARK = ".new-"     # DIR's next state while a run writes it: .<name>.new-<pid>
OLD_MARK = ".old-"     # DIR's previous state between the two renames: .<name>.old-<pid>
ROWS_PER_BATCH = 1 << 16

_TS = pa.timestamp("us", tz="UTC")
# One row per entry log; a disk without logs has one row with a null log_id (its identity is kept).
LOGS_SCHEMA = pa.schema([
    ("disk", pa.string()), ("bookie_id", pa.string()), ("instance_id", pa.string()),
    ("cookie_hash", pa.binary()), ("log_id", pa.int64()), ("size", pa.int64()), ("inode", pa.int64()),
    ("mtime_ns", pa.int64()), ("frame_hash", pa.binary()), ("last_deep", _TS), ("due_at", _TS),
    ("verdict", pa.string()), ("found_at", _TS), ("carried", pa.string())])


class StateError(BkdiskError):
    """A --state folder that cannot be read or written."""


@dataclass(frozen=True)
class DiskState:
    identity: DiskIdentity
    logs: dict[int, LogState]


def logs_for(state: Mapping[str, DiskState], disk: str, identity: DiskIdentity) -> dict[int, LogState] | None:
    """What the state holds of ``disk``'s logs, None when the disk starts fresh: the state does not
    know it, or knows another disk by that name (another cookie, another instance id)."""
    known = state.get(disk)
    return None if known is None or known.identity != identity else known.logs


def _aside(path: str, mark: str) -> str:
    parent, name = os.path.split(os.path.abspath(path))
    return os.path.join(parent, f".{name}{mark}{os.getpid()}")


def probe_writable(path: str) -> None:
    """Refuse, before any disk is scanned, a state (read already) that a run could not write at its
    end, changing nothing: ``write_state`` makes the new state beside ``path`` and renames ``path``
    aside and the new one in, so a folder is made and removed where the new one goes (in the nearest
    folder there is, made by the run otherwise), and ``path`` renamed aside and back (a kill between
    leaves it aside, where ``state_folder`` finds it)."""
    if os.path.islink(path):
        raise StateError(f"{path}: a symbolic link; give the folder it leads to as --state")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(parent) and os.path.dirname(parent) != parent:
        if os.path.lexists(parent):
            raise StateError(f"{path}: cannot write the scrub state ({parent} is not a folder)")
        parent = os.path.dirname(parent)
    try:
        os.rmdir(tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.probe-", dir=parent))
        if os.path.isdir(path):
            aside = _aside(path, OLD_MARK)
            os.rename(path, aside)
            os.rename(aside, path)
    except OSError as e:
        raise StateError(f"{path}: cannot write the scrub state ({e.strerror})") from None


def _leftovers(path: str, mark: str) -> list[str]:
    parent, name = os.path.split(os.path.abspath(path))
    prefix = f".{name}{mark}"
    try:
        return sorted(os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(prefix))
    except OSError:
        return []


def state_batches(disks: Mapping[str, DiskState]) -> Iterator[pa.RecordBatch]:
    """The state's rows, a bounded batch at a time."""
    rows: list[dict] = []
    for disk, d in disks.items():
        ident = d.identity
        head = {"disk": disk, "bookie_id": ident.bookie_id, "instance_id": ident.instance_id,
                "cookie_hash": ident.cookie_hash}
        if not d.logs:
            rows.append(dict(head))
        for lid, s in d.logs.items():
            i = s.identity
            rows.append(dict(head, log_id=lid, size=i.size, inode=i.inode, mtime_ns=i.mtime_ns,
                             frame_hash=i.frame_hash, last_deep=s.last_deep, due_at=s.due_at,
                             verdict=s.verdict, found_at=s.found_at, carried=s.carried))
            if len(rows) >= ROWS_PER_BATCH:
                yield pa.RecordBatch.from_pylist(rows, schema=LOGS_SCHEMA)
                rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=LOGS_SCHEMA)


def write_state(path: str, batches: Iterable[pa.RecordBatch], fill: Callable[[str], None] | None = None) -> None:
    """Replace the state at ``path`` with ``batches`` (LOGS_SCHEMA), whole or not at all; ``fill``
    adds the rest of the new state's files into its folder (the payload hashes) before the renames."""
    if os.path.lexists(path) and not os.path.exists(os.path.join(path, MARKER)):
        raise StateError(f"{path}: exists and is not a bkdisk scrub state; choose another --state")
    for stale in _leftovers(path, NEW_MARK):    # a killed run's unfinished state
        shutil.rmtree(stale, ignore_errors=True)
    new = _aside(path, NEW_MARK)
    try:
        os.makedirs(new)
        with pq.ParquetWriter(os.path.join(new, LOGS_FILE), LOGS_SCHEMA, write_page_checksum=True) as w:
            for b in batches:
                w.write_batch(b)
        with open(os.path.join(new, LOGS_FILE), "rb") as f:
            os.fsync(f.fileno())
        if fill is not None:
            fill(new)
        open(os.path.join(new, MARKER), "w").close()
        fsync_dir(new)
        old = _aside(path, OLD_MARK)
        had_old = os.path.isdir(path)
        if had_old:
            os.rename(path, old)
        os.rename(new, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        shutil.rmtree(new, ignore_errors=True)
        raise StateError(f"{path}: cannot write the scrub state ({e.strerror})") from None
    for stale in _leftovers(path, OLD_MARK):
        shutil.rmtree(stale, ignore_errors=True)


def _when(v: datetime.datetime | None) -> datetime.datetime | None:
    return None if v is None else v.astimezone(datetime.UTC)


def state_folder(path: str) -> str | None:
    """The folder holding the last good state at ``path``: ``path``, or the previous state renamed
    aside by a run killed between its renames; None when there is none yet (a first run)."""
    if os.path.exists(path):
        return path
    aside = [p for p in _leftovers(path, OLD_MARK) if os.path.exists(os.path.join(p, MARKER))]
    return aside[-1] if aside else None


def read_state(path: str, disk: str | None = None) -> dict[str, DiskState]:
    """The last good state at ``path``, of every disk or of ``disk`` only (a disk's task reads its
    own): {} when there is none yet (a first run)."""
    where = state_folder(path)
    if where is None:
        return {}
    if not os.path.exists(os.path.join(where, MARKER)):
        raise StateError(f"{path}: not a bkdisk scrub state (no {MARKER}); choose another --state")
    f = os.path.join(where, LOGS_FILE)
    try:
        pf = pq.ParquetFile(f, page_checksum_verification=True)   # a flipped bit is damage, not a value
        if not pf.schema_arrow.equals(LOGS_SCHEMA):
            raise StateError(f"{f}: expected the columns of a bkdisk scrub state, found "
                             f"{_schema_difference(pf.schema_arrow)}")
        out: dict[str, DiskState] = {}
        rows = 0
        for b in pf.iter_batches(batch_size=ROWS_PER_BATCH):
            rows += len(b)
            if disk is not None:
                b = b.filter(pa.compute.equal(b["disk"], disk))
            for r in b.to_pylist():
                if r["disk"] is None:
                    raise StateError(f"{f}: expected a disk in every row, found a null")
                d = out.setdefault(r["disk"], DiskState(DiskIdentity(r["bookie_id"], r["instance_id"],
                                                                      r["cookie_hash"]), {}))
                if r["log_id"] is None:
                    continue
                ident = LogIdentity(r["size"], r["inode"], r["mtime_ns"], r["frame_hash"])
                due = _when(r["due_at"])
                if due is None or None in (r["size"], r["inode"], r["mtime_ns"], r["frame_hash"]):
                    raise StateError(f"{f}: disk {r['disk']} log {r['log_id']}: expected its identity and "
                                     f"due_at, found nulls")
                d.logs[r["log_id"]] = LogState(ident, _when(r["last_deep"]), due,
                                               r["verdict"], _when(r["found_at"]), r["carried"])
        if rows != pf.metadata.num_rows:   # a page header's count damaged: pages covered by no checksum
            raise StateError(f"{f}: expected {pf.metadata.num_rows} rows (its footer), read {rows}")
    except (OSError, pa.ArrowException) as e:
        raise StateError(f"{f}: not a readable scrub state ({str(e).splitlines()[0]})") from None
    except (OverflowError, ValueError) as e:   # a time no datetime holds
        raise StateError(f"{f}: expected the times of a scrub state, found one out of range ({e})") from None
    return out


def _schema_difference(found: pa.Schema) -> str:
    """What ``found`` lacks of LOGS_SCHEMA, has of another type, and has besides, in a few words."""
    want = {f.name: f.type for f in LOGS_SCHEMA}
    have = {f.name: f.type for f in found}

    def names(xs: list[str]) -> str:
        return ", ".join(xs[:5]) + (f" and {len(xs) - 5} more" if len(xs) > 5 else "")
    missing = [n for n in want if n not in have]
    typed = [f"{n} of type {have[n]} (expected {t})" for n, t in want.items() if n in have and have[n] != t]
    unknown = [n for n in have if n not in want]
    said = ([f"no column {names(missing)}"] if missing else []) + ([f"column {names(typed)}"] if typed else []) \
        + ([f"an unknown column {names(unknown)}"] if unknown else [])
    if said:
        return "; ".join(said)
    if list(have) != list(want):
        return "the columns in another order"
    other = [f.name for f in found if not f.equals(LOGS_SCHEMA.field(f.name))]
    return f"columns declared otherwise ({', '.join(other)}: nullability or metadata)"
