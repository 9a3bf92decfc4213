"""``bkdisk inventory``: every entry in a bookie's entry logs, as JSON lines or a summary.

Each ROOT is a folder holding bookies' dirs (found by bookie.layout.discover_all, one or several); ``--conf`` reads
the dirs of a bk_server.conf instead. ``--metadata-dir`` points at ledger metadata files
(``<hex ledger id>.bin`` / ``.txt``, BookKeeper's LedgerMetadataSerDe formats) that give each
ledger's digest type and password; ledgers without metadata have their digest type sniffed
(CRC32C, CRC32; HMAC only with a known password), and ``digest_ok`` is null when it stays unknown.
Framing damage and header or ledgers-map errors are reported on stderr as warnings, one line each;
the scan goes on past them (entrylogs/scan.py resyncs after damage).
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

import click

from bkdisk.errors import one_line_errors
from bookie.layout import BookieDirs, bookie_id_of, discover_all, from_conf
from bookie.metadata_dir import digest_plan, load_metadata_dir
from entrylogs.reader import Damage
from entrylogs.scan import DEFAULT_WINDOW, DIGEST_BAD, DIGEST_OK, SOURCE_NAMES, DigestPlan, scan_entry_log
from formats.digests import DigestType
from formats.errors import BkdiskError
from formats.paths import CURRENT_DIR, parse_entry_log_name


class InventoryError(BkdiskError):
    """The inventory could not be started (no bookie given, an unreadable metadata folder)."""


@dataclass
class BookieSummary:
    bookie_id: str | None
    logs: int = 0
    entries: int = 0
    ledgers: set = field(default_factory=set)
    ok: int = 0
    bad: int = 0
    unknown: int = 0
    problems: int = 0


def entry_logs(ledger_dir: str) -> list[tuple[int, str]]:
    """(log id, path) of every ``<hex>.log`` in ``<ledger_dir>/current``, by id."""
    cur = os.path.join(ledger_dir, CURRENT_DIR)
    try:
        names = os.listdir(cur)
    except OSError as e:
        _warn(f"{cur}: cannot list ({e.strerror})")
        return []
    logs = [(parse_entry_log_name(n), os.path.join(cur, n)) for n in names]
    return sorted((i, p) for i, p in logs if i is not None)


def _warn(msg: str) -> None:
    click.echo(f"bkdisk: warning: {msg}", err=True)


def inventory_bookie(dirs: BookieDirs, plan: DigestPlan, out, *, jsonl: bool, payload_hash: str | None,
                     window: int = DEFAULT_WINDOW) -> BookieSummary:
    """Scan every entry log of one bookie; write one JSON line per entry when ``jsonl``."""
    bid = bookie_id_of(dirs)
    summary = BookieSummary(bid)
    dumps = json.dumps
    for ld in dirs.ledger_dirs:
        ld_name = os.path.basename(os.path.normpath(ld))
        for log_id, path in entry_logs(ld):
            s = scan_entry_log(path, window=window, digests=plan, payload_hash=payload_hash)
            summary.logs += 1
            if s.header_error is not None:
                _warn(f"{s.header_error}")
            if s.map_error is not None:
                _warn(f"{s.map_error}")
            for p in s.problems:
                _warn(f"{path}: offset {int(p['offset'])}: framing broken ({Damage(int(p['reason'])).name.lower()}),"
                      f" resumed at {int(p['resumed_at'])}")
            summary.problems += len(s.problems)
            e, d = s.entries, s.digests
            n = len(e)
            if n == 0:
                continue
            summary.entries += n
            st = d["status"]
            summary.ok += int((st == DIGEST_OK).sum())
            summary.bad += int((st == DIGEST_BAD).sum())
            summary.unknown += int(n - (st == DIGEST_OK).sum() - (st == DIGEST_BAD).sum())
            if not jsonl:
                summary.ledgers.update(zip(e["scope"].tolist(), e["ledger"].tolist()))
                continue
            cols = [e[c].tolist() for c in ("offset", "scope", "ledger", "entry", "format", "size", "lac", "length")]
            dcols = [d[c].tolist() for c in ("type", "source", "status", "payload_len")]
            hashes = s.payload_hashes if payload_hash else [None] * n
            lines = []
            for (off, scope, ledger, entry, fmt, size, lac, length), (dt, src, stt, plen), h in zip(
                    zip(*cols), zip(*dcols), hashes):
                row = {"bookie_id": bid, "ledger_dir": ld_name, "log_id": log_id, "offset": off, "scope": scope,
                       "ledger": ledger, "entry": entry, "format": fmt, "size": size, "lac": lac, "length": length,
                       "payload_len": plen if plen >= 0 else None,
                       "digest_type": DigestType(dt).name if dt else None,
                       "digest_source": SOURCE_NAMES[src],
                       "digest_ok": True if stt == DIGEST_OK else False if stt == DIGEST_BAD else None}
                if payload_hash:
                    row["payload_sha256"] = h
                lines.append(dumps(row))
            out.write("\n".join(lines) + "\n")
    return summary


@click.command("inventory")
@click.argument("roots", nargs=-1, metavar="ROOT...")
@click.option("--jsonl", is_flag=True, help="One JSON object per entry on stdout (default: a summary per bookie).")
@click.option("--payload-hash", type=click.Choice(["sha256"]), default=None,
              help="Add each payload's hash (payload_sha256).")
@click.option("--conf", "conf", default=None, metavar="bk_server.conf",
              help="Take the bookie's dirs from a BookKeeper server config (journalDirectories, "
                   "ledgerDirectories, indexDirectories).")
@click.option("--metadata-dir", default=None, metavar="DIR",
              help="Folder of ledger metadata files (<hex ledger id>.bin/.txt): digest types and passwords.")
@click.option("--window", type=click.IntRange(min=4096), default=DEFAULT_WINDOW, show_default=True, hidden=True,
              help="Bytes of an entry log mapped at once.")
@one_line_errors
def inventory(roots: tuple[str, ...], jsonl: bool, payload_hash: str | None, conf: str | None,
              metadata_dir: str | None, window: int) -> None:
    """Inventory every entry in the entry logs of the bookies under ROOT... (or of --conf)."""
    if not roots and conf is None:
        raise InventoryError("nothing to inventory: give one or more ROOT folders or --conf bk_server.conf")
    meta = {}
    if metadata_dir:
        meta, errors = load_metadata_dir(metadata_dir)
        if errors:
            raise errors[0]
    # A ROOT may hold several bookies (a cluster's disks side by side): each is inventoried on its own.
    bookies = [b for r in roots for b in discover_all(r)] + ([from_conf(conf)] if conf else [])
    out = sys.stdout
    for dirs in bookies:
        # Sniffed digest types stay per bookie: ROOTs may come from clusters that reuse ledger ids.
        s = inventory_bookie(dirs, digest_plan(meta), out, jsonl=jsonl, payload_hash=payload_hash, window=window)
        if not jsonl:
            where = dirs.root or dirs.conf_path
            click.echo(f"{where}: bookie {s.bookie_id or '?'}: {s.entries} entries in {len(s.ledgers)} ledgers, "
                       f"{s.logs} entry logs; digests ok {s.ok}, bad {s.bad}, unknown {s.unknown}; "
                       f"framing problems {s.problems}")
    out.flush()
