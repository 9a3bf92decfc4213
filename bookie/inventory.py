"""A bookie's entries as columns: one batch per entry log, for JSON Lines, Parquet and the Spark audit.

Each batch holds the scanner's arrays as they come (no per-entry Python objects); the row schema,
``INVENTORY_FIELDS``, is the one `bkdisk inventory --jsonl` prints, `--parquet` writes and the
audit's replica rows start from. Damage the scan met comes back as data (``LogRows.warnings``).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from bkdisk.bookie.layout import BookieDirs, bookie_id_of
from bkdisk.diskio.digests import DIGEST_BAD, DIGEST_OK, DIGEST_UNKNOWN, SOURCE_NAMES, DigestPlan
from bkdisk.diskio.jsonl import CHOICE, DIGEST, INT, INT_OR_NULL, UINT, RowTemplate, Slot
from bkdisk.diskio.mapped import DiskError
from bkdisk.diskio.payload_hashes import PayloadHashes
from bkdisk.entrylogs.reader import Damage
from bkdisk.entrylogs.scan import DEFAULT_WINDOW, EntryLogScanArrays, scan_entry_log
from bkdisk.formats.digests import DigestType
from bkdisk.formats.errors import FormatError
from bkdisk.formats.paths import CURRENT_DIR, parse_entry_log_name

_DIGEST_NAMES = tuple([None] + [DigestType(c).name for c in range(1, max(DigestType) + 1)])
_SOURCES = tuple(SOURCE_NAMES.get(c) for c in range(max(SOURCE_NAMES) + 1))
_DIGEST_OK = tuple(True if c == DIGEST_OK else False if c == DIGEST_BAD else None
                   for c in range(max(DIGEST_OK, DIGEST_BAD) + 1))

# A DUMMY entry carries no digest: nothing about its bytes was verified, whatever the scan's status says.
UNVERIFIABLE_TYPES = (int(DigestType.DUMMY),)


def verified_status(digests: np.ndarray) -> np.ndarray:
    """The digest status of each row as the rows say it: DIGEST_OK only where a digest was checked;
    a DUMMY entry's is DIGEST_UNKNOWN (``digest_ok`` null, counted unverifiable)."""
    st = digests["status"]
    dummy = np.isin(digests["type"], UNVERIFIABLE_TYPES)
    return np.where(dummy, DIGEST_UNKNOWN, st).astype(st.dtype) if dummy.any() else st


# The row, in order: (key, how it is written); constants per entry log are bookie_id, ledger_dir, log_id.
CONSTANT_FIELDS = ("bookie_id", "ledger_dir", "log_id")
JSONL_ROWS = 1 << 16   # rows encoded at once
SLOTS = (Slot("offset", INT), Slot("scope", UINT), Slot("ledger", UINT), Slot("entry", INT), Slot("format", INT),
         Slot("size", INT), Slot("lac", INT), Slot("length", INT), Slot("payload_len", INT_OR_NULL),
         Slot("digest_type", CHOICE, _DIGEST_NAMES), Slot("digest_source", CHOICE, _SOURCES),
         Slot("digest_ok", CHOICE, _DIGEST_OK))
HASH_SLOT = Slot("payload_sha256", DIGEST)
INVENTORY_FIELDS = CONSTANT_FIELDS + tuple(s.key for s in SLOTS)


@dataclass
class LogRows:
    """The entries of one entry log, as columns."""

    bookie_id: str | None
    ledger_dir: str
    log_id: int
    path: str
    entries: np.ndarray                 # entrylogs.arrays.ENTRY_DTYPE
    digests: np.ndarray | None          # diskio.digests.DIGEST_DTYPE; None for a scan made without digests
    payload_sha256: np.ndarray | None   # (n, 32) uint8 when asked for; rows without a payload are all -1 in hash_row
    hash_row: np.ndarray | None
    warnings: list[str] = field(default_factory=list)
    problems: int = 0                   # framing damage met (each also in warnings)

    def __len__(self) -> int:
        return len(self.entries)

    def only(self, scope: int, ledger: int) -> LogRows:
        """The rows of one ledger (BP-35: a scope and a ledger id)."""
        keep = (self.entries["scope"] == scope) & (self.entries["ledger"] == ledger)
        rows = None if self.hash_row is None else self.hash_row[keep]
        digests = None if self.digests is None else self.digests[keep]
        return LogRows(self.bookie_id, self.ledger_dir, self.log_id, self.path, self.entries[keep],
                       digests, self.payload_sha256, rows, self.warnings, self.problems)

    def checked_digests(self) -> np.ndarray:
        """The digest rows; the rows an inventory lists come from a scan that checked digests."""
        assert self.digests is not None, f"{self.path}: scanned without checking digests"
        return self.digests

    def columns(self) -> dict[str, np.ndarray]:
        e, d = self.entries, self.checked_digests()
        return {"offset": e["offset"], "scope": e["scope"], "ledger": e["ledger"], "entry": e["entry"],
                "format": e["format"], "size": e["size"], "lac": e["lac"], "length": e["length"],
                "payload_len": d["payload_len"], "digest_type": d["type"], "digest_source": d["source"],
                "digest_ok": verified_status(d)}

    def jsonl(self) -> bytes:
        """The rows as JSON Lines, exactly as json.dumps writes each row (keys in INVENTORY_FIELDS order)."""
        return b"".join(self.jsonl_parts())

    def jsonl_parts(self, rows: int = JSONL_ROWS) -> Iterator[bytes]:
        """``jsonl()`` in parts of ``rows`` rows: the text of a whole log of small entries is several
        times its entries' arrays (hundreds of MiB for a 512 MiB log of 500-byte entries)."""
        for part in self.jsonl_views(rows):
            yield part.tobytes()

    def write_jsonl(self, out, rows: int = JSONL_ROWS) -> None:
        """``jsonl()`` written to the binary stream ``out`` a part at a time, from one reused buffer."""
        for part in self.jsonl_views(rows):
            out.write(part)

    def jsonl_views(self, rows: int = JSONL_ROWS) -> Iterator[np.ndarray]:
        """``jsonl_parts`` as uint8 views of one buffer: each is overwritten by the next."""
        with_hash = self.payload_sha256 is not None
        consts = {"bookie_id": self.bookie_id, "ledger_dir": self.ledger_dir, "log_id": self.log_id}
        order = INVENTORY_FIELDS + ((HASH_SLOT.key,) if with_hash else ())
        template = RowTemplate(consts, SLOTS + ((HASH_SLOT,) if with_hash else ()), order)
        cols = self.columns()
        for lo in range(0, len(self), rows):
            part = {k: v[lo:lo + rows] for k, v in cols.items()}
            hash_rows = None if self.hash_row is None else self.hash_row[lo:lo + rows]
            yield template.encode_view(part, self.payload_sha256, hash_rows)

    def part(self, lo: int, hi: int) -> LogRows:
        """Rows [lo, hi), as views of these rows' arrays."""
        return LogRows(self.bookie_id, self.ledger_dir, self.log_id, self.path, self.entries[lo:hi],
                       None if self.digests is None else self.digests[lo:hi], self.payload_sha256,
                       None if self.hash_row is None else self.hash_row[lo:hi], self.warnings, self.problems)

    def arrow(self, *, coded: bool = False, room=None):
        """The rows as a pyarrow RecordBatch with the same names and JSON's nulls.

        With ``coded``, the string columns (bookie_id, ledger_dir, digest_type, digest_source) are
        dictionary arrays over their few values: a Parquet writer stores those as its dictionary
        pages and indices as they are, without hashing each row's text. With ``room`` (an
        arrow_columns.ColumnRoom) the numeric columns are built in its arrays, valid until the next
        batch is built in it."""
        import pyarrow as pa

        from bkdisk.bookie import arrow_columns as ac
        n = len(self)
        e = self.entries
        d = self.checked_digests()
        plen = d["payload_len"]
        arrays = [
            ac.constant(self.bookie_id, n, coded, room, "bookie_id"),
            ac.constant(self.ledger_dir, n, coded, room, "ledger_dir"),
            ac.filled(self.log_id, n, room, "log_id"),
            *(ac.numeric(e[s.key], None, room, s.key) for s in SLOTS[:8]),
            ac.numeric(plen, plen >= 0, room, "payload_len"),
            ac.decoded(d["type"], _DIGEST_NAMES, coded, room, "digest_type"),
            ac.decoded(d["source"], _SOURCES, coded, room, "digest_source"),
        ]
        ok = verified_status(d)
        arrays.append(ac.booleans(ok == DIGEST_OK, (ok == DIGEST_OK) | (ok == DIGEST_BAD)))
        names = list(INVENTORY_FIELDS)
        if self.payload_sha256 is not None and self.hash_row is not None:
            arrays.append(ac.hex_column(self.payload_sha256, self.hash_row))
            names.append(HASH_SLOT.key)
        return pa.RecordBatch.from_arrays(arrays, names=names)


def entry_logs(ledger_dir: str) -> tuple[list[tuple[int, str]], str | None]:
    """(log id, path) of every ``<hex>.log`` in ``<ledger_dir>/current`` by id, and why listing failed."""
    cur = os.path.join(ledger_dir, CURRENT_DIR)
    try:
        names = os.listdir(cur)
    except OSError as e:
        return [], f"{cur}: cannot list ({e.strerror})"
    logs = [(parse_entry_log_name(n), os.path.join(cur, n)) for n in names]
    return sorted((i, p) for i, p in logs if i is not None), None


def _hash_array(hashes: PayloadHashes | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    if hashes is None:
        return None, None
    return hashes.raw, np.where(hashes.present, np.arange(len(hashes), dtype=np.int64), -1)


def scan_bookie(dirs: BookieDirs, plan: DigestPlan, *, payload_hash: str | None = None,
                window: int = DEFAULT_WINDOW, meanwhile: Callable[[], object] | None = None
                ) -> Iterator[LogRows | str]:
    """Every entry log of one bookie as a LogRows, in ledger-dir then log-id order; a str says what
    could not be read: a dir that could not be listed, or an entry log that could not be opened or
    read (the logs after it are still scanned).

    The next log is scanned on a helper thread while the caller handles the rows of the one before
    (encodes, writes them): the logs are still scanned one at a time and in order, so the digest plan
    sees them as a scan on one thread does, and the rows are the same. A caller that stops early (a
    closed pipe, Ctrl-C) waits for the log scanned ahead to finish: one log's scan at the most.
    ``meanwhile`` runs on the caller's thread once the first log's scan is under way (what the
    caller will need for the rows, imported while the scan runs)."""
    from concurrent.futures import ThreadPoolExecutor
    bid = bookie_id_of(dirs)
    items: list[str | tuple[str, int, str]] = []
    for ld in dirs.ledger_dirs:
        found, failure = entry_logs(ld)
        if failure:
            items.append(failure)
        items += [(ledger_dir_name(ld), log_id, path) for log_id, path in found]

    def scan(ld_name: str, log_id: int, path: str) -> LogRows:
        return log_rows(bid, ld_name, log_id, scan_entry_log(path, window=window, digests=plan,
                                                             payload_hash=payload_hash, digest_facts=True))

    logs = iter([item for item in items if not isinstance(item, str)])
    with ThreadPoolExecutor(1, thread_name_prefix="inventory-scan") as helper:
        def scan_next():   # the next log's scan, under way (None: no log left)
            item = next(logs, None)
            return None if item is None else helper.submit(scan, *item)

        pending = scan_next()
        if meanwhile is not None and pending is not None:
            meanwhile()
        for item in items:
            if isinstance(item, str):
                yield item
                continue
            done, pending = pending, scan_next()
            try:
                rows = done.result()   # this log's
            except (DiskError, FormatError) as e:
                yield str(e)
                continue
            yield rows


def ledger_dir_name(ledger_dir: str) -> str:
    """What the rows call a ledger dir (``ledger_dir``): its folder name."""
    return os.path.basename(os.path.normpath(ledger_dir))


def log_rows(bookie_id: str | None, ledger_dir: str, log_id: int, s: EntryLogScanArrays) -> LogRows:
    """The rows of one scanned entry log (a scan made here or by fsck's pass 4, which the audit reuses)."""
    digests, rows = _hash_array(s.payload_hashes)
    return LogRows(bookie_id, ledger_dir, log_id, s.path, s.entries, s.digests, digests, rows, scan_warnings(s),
                   len(s.problems))


def scan_warnings(s: EntryLogScanArrays) -> list[str]:
    """What a log's rows say of the damage its scan met (a spilled scan's per-entry arrays stay unread)."""
    warnings = [str(err) for err in (s.header_error, s.map_error) if err is not None]
    return warnings + [f"{s.path}: offset {int(p['offset'])}: framing broken "
                       f"({Damage(int(p['reason'])).name.lower()}), resumed at {int(p['resumed_at'])}"
                       for p in s.problems]
