"""What a disk keeps of each ledger beside its entries, as rows of the disk task's ``ledger_keys``
table: the master key (each ``.idx`` header, DbLedgerStorage's ledgers index, the journals' ledger-key
records) and the explicit LAC (the same three), one row per ledger and source. Salvage matches the
master keys against passwords and takes the explicit LAC into recovery's close (specs/salvage.md).

Read from the checker's own reads (fsck's context): the index walk, the RocksDB read, the journals'
facts; nothing is read twice."""
from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from bkdisk.formats.ids import to_signed64
from bkdisk.formats.journal import LAC_BODY

KEY_BATCH_ROWS = 1 << 16
SOURCES = ("index", "ledgers_index", "journal")


def _lac(body: bytes | None) -> int | None:
    try:
        return None if not body else int(LAC_BODY.parse(body).lac)
    except Exception:   # noqa: BLE001 - a body fsck already reported as damaged tells no LAC
        return None


def key_rows(ctx) -> Iterator[tuple[int, int, str | None, int | None, str]]:
    """(scope, ledger as Java's signed longs, master key hex or None, explicit LAC or None, source)."""
    if ctx.dirs.storage_kind == "index-files":
        inv = ctx.index_inventory
        for row, h in zip(inv.files, inv.headers):
            if h is not None and row["named"]:
                yield (to_signed64(int(row["scope"])), to_signed64(int(row["ledger"])), h.master_key.hex(),
                       h.explicit_lac, "index")
    elif ctx.dirs.storage_kind == "rocksdb":
        from bkdisk.fsck import dbindex
        for _di, _current, idx in dbindex.read(ctx):
            if not dbindex.is_index(idx):
                continue
            table = idx.ledgers
            for lid in table:
                info = table.get(lid)
                if info is not None:
                    yield 0, int(lid), info.master_key.hex(), info.explicit_lac, "ledgers_index"
    facts = ctx.journal_facts
    keys = facts.master_keys
    for lid, key in keys.pairs():
        yield to_signed64(lid.scope), to_signed64(lid.ledger), key.hex(), _lac(facts.explicit_lac.get(lid)), "journal"
    # The explicit LACs of ledgers the journals give no key, asked of the keys' table a batch at a time (a
    # set of a million keyed ledgers would cost more than the table).
    lacs = iter(facts.explicit_lac.items())
    while part := list(itertools.islice(lacs, KEY_BATCH_ROWS)):
        rows = keys.index_of(np.array([lid.scope for lid, _b in part], np.uint64),
                             np.array([lid.ledger for lid, _b in part], np.uint64))
        for (lid, body), row in zip(part, rows.tolist(), strict=True):
            if row < 0:
                yield to_signed64(lid.scope), to_signed64(lid.ledger), None, _lac(body), "journal"


def key_batches(ctx, rows: int = KEY_BATCH_ROWS) -> Iterator[dict[str, list]]:
    """``key_rows`` as columns of the ``ledger_keys`` table, at most ``rows`` at a time."""
    names = ("ledger_scope", "ledger_id", "master_key", "explicit_lac", "key_source")
    cols: dict[str, list] = {n: [] for n in names}
    for r in key_rows(ctx):
        for n, v in zip(names, r):
            cols[n].append(v)
        if len(cols["ledger_id"]) >= rows:
            yield cols
            cols = {n: [] for n in names}
    if cols["ledger_id"]:
        yield cols
