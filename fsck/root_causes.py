"""Root causes the passes see only through their consequences: an entry log the index points into
that no ledger dir holds becomes one finding naming the ledgers and entries it took with it, and the
per-entry findings it explains are linked under it (reports list them with -v and in --json)."""
from __future__ import annotations

import os

from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import entry_log_name
from bkdisk.fsck.codes import Code
from bkdisk.fsck.entry_ranges import per_ledger
from bkdisk.fsck.findings import Finding, given

# Their findings carry the missing log's id in ``extra["log_id"]``.
MISSING_LOG_CODES = (Code.INDEX_LOCATION_MISSING_LOG, Code.DBINDEX_LOCATION_MISSING_LOG)


def _locations_by_log(findings: list[Finding], *, unexplained: bool) -> dict[int, list[Finding]]:
    """The locations into logs no listed ledger dir holds, by log id (``unexplained``: only those no
    other finding explains yet)."""
    by_log: dict[int, list[Finding]] = {}
    for f in findings:
        if f.code in MISSING_LOG_CODES and f.ledger is not None and f.entry is not None and \
                not (unexplained and f.caused_by is not None):
            by_log.setdefault(given(f.extra.get("log_id"), f"{f.code}'s log id"), []).append(f)
    return by_log


def missing_log_causes(findings: list[Finding]) -> list[Finding]:
    """One LOG_MISSING per entry log that index locations name and no ledger dir holds; sets
    ``caused_by`` on those locations and on the ENTRY_MISSING/ENTRIES_MISSING of the entries it held."""
    by_log = _locations_by_log(findings, unexplained=True)
    causes = []
    lost_in: dict[tuple[LedgerId, int], Finding] = {}
    for log_id, locs in sorted(by_log.items()):
        name = entry_log_name(log_id)
        pairs = [(f.lid, given(f.entry, f"{f.code}'s entry")) for f in locs]
        n_ledgers = len({lid for lid, _e in pairs})
        cause = Finding(Code.LOG_MISSING, detail=f"{name}, which the index points into ({len(pairs)} entries of "
                                             f"{n_ledgers} ledger{'s' if n_ledgers != 1 else ''}), found it in no "
                                             f"ledger dir: lost {per_ledger(pairs)}",
                        extra={"log": name, "entries": len(pairs)})
        for f in locs:
            f.caused_by = cause
            lost_in[(f.lid, given(f.entry, f"{f.code}'s entry"))] = cause
        causes.append(cause)
    if not causes:
        return causes
    for f in findings:
        if f.code == Code.ENTRY_MISSING and f.caused_by is None:
            f.caused_by = lost_in.get((f.lid, given(f.entry, f"{f.code}'s entry")))
        elif f.code == Code.ENTRIES_MISSING and f.caused_by is None:
            hit = [lost_in[k] for k in ((f.lid, e) for e in f.extra.get("entries", ())) if k in lost_in]
            f.caused_by = hit[0] if hit else None
    return causes


def unlisted_log_causes(findings: list[Finding], unlisted: list[str]) -> tuple[list[Finding], list[Finding]]:
    """With ledger dirs whose ``current`` folders (``unlisted``) could not be listed, an entry log the index
    points into that no listed dir holds may be in one of them (BookKeeper opens its logs by name): not
    lost, unchecked. (The locations into such logs, to drop; one LOG_UNLISTED per log in their place.)"""
    dropped: list[Finding] = []
    causes: list[Finding] = []
    if not unlisted:
        return dropped, causes
    for log_id, locs in sorted(_locations_by_log(findings, unexplained=False).items()):
        name = entry_log_name(log_id)
        found = next((cur for cur in unlisted if os.path.isfile(os.path.join(cur, name))), None)
        where = (f"found it by name in {found}, which could not be listed" if found else
                 f"{' and '.join(unlisted)} could not be listed and may hold it")
        n_ledgers = len({f.lid for f in locs})
        causes.append(Finding(Code.LOG_UNLISTED, path=os.path.join(found, name) if found else None,
                              detail=f"{name}, which the index points into ({len(locs)} entries of {n_ledgers} "
                                     f"ledger{'s' if n_ledgers != 1 else ''}), in a ledger dir fsck could list; "
                                     f"{where}: its entries were not checked",
                              extra={"log": name, "entries": len(locs)}))
        dropped += locs
    return dropped, causes
