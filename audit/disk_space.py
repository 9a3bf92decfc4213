"""A disk's rows of ``bkdisk space`` for the audit's ``space`` table, from the scans its check made."""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from bkdisk.formats.errors import BkdiskError

# Space rows per batch: each is a dict of some twenty fields while its batch is built (~2 KB), so a
# part holds a few MiB whatever the disk's ledgers.
SPACE_BATCH_ROWS = 1 << 12


def space_rows(dirs, bid: str, metadata: Mapping | None, ctx, part_rows: int = SPACE_BATCH_ROWS
               ) -> tuple[Iterable[list[dict]], str | None]:
    """The disk's rows of ``bkdisk space`` (logs, ledgers, topics; GC settings from the disk's
    bk_server.conf when it was given as one), from fsck's scans where a log has no ledgers map, in
    parts of at most ``part_rows`` rows, each made as it is taken (a disk of a million ledgers holds
    its ledger rows as the report's columns, never as a million dicts); and why they are missing
    when they cannot be computed (the disk's audit stands without them)."""
    from bkdisk.bookie.gc_policy import settings_from_conf
    from bkdisk.bookie.space import account_bookie, listed_ledgers
    scans = {p: s for p, s in ctx.log_scans.items() if not isinstance(s, Exception)}
    inv = ctx.index_inventory if dirs.storage_kind != "rocksdb" and ctx.computed("index_inventory") else None
    try:
        rep = account_bookie(dirs, metadata, settings_from_conf(dirs.conf_path), metadata_from="audit metadata",
                             scans=scans, bookie_id=bid, indexed=None if inv is None else listed_ledgers(inv))
    except BkdiskError as e:
        return [], f"space not computed: {e}"
    rows = itertools.chain(rep.logs, rep.ledgers, rep.topics)
    return iter(lambda: list(itertools.islice(rows, part_rows)), []), None
