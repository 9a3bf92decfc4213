"""The space report's ledger and topic rows, from its (log, ledger) arrays: each summed over the rows
at once (numpy), the Python work one step per ledger and per topic, not per (log, ledger) row: a busy
bookie's logs each name thousands of ledgers."""
from __future__ import annotations

from typing import Any

import numpy as np

from bkdisk.diskio.distinct import distinct_rows
from bkdisk.formats.ids import LedgerId


def _sums(group: np.ndarray, n: int):
    """Per group of ``group`` (0..n-1), the sum of ``values`` as Python ints, added as int64 (exact,
    where a float64 sum would round above 2**53 bytes)."""
    def total(values: np.ndarray) -> list[int]:
        out = np.zeros(n, np.int64)
        np.add.at(out, group, np.asarray(values).astype(np.int64))
        return out.tolist()
    return total


def per_ledger(logs, scope, ledger, nbytes, log_of, inv, live, states, live_state: str, md_states, topics, old, sole,
               sizes, bookie_id) -> list[dict[str, Any]]:
    """One row per ledger (across groups, DbLedgerStorage's dirs: in the state of its first,
    ``live_state`` where any keeps it), its logs in the order of its rows; the ledgers freeing most
    first. ``inv``: each row's (group, ledger), whose state, metadata's state and topic are ``states``,
    ``md_states``, ``topics``."""
    if len(ledger) == 0:
        return []
    (uscope, uledger), per = distinct_rows(scope, ledger)
    n = len(uledger)
    order = np.argsort(per, kind="stable")   # each ledger's rows together, in row order
    counts = np.bincount(per, minlength=n)   # (every ledger has a row)
    ends = np.cumsum(counts)
    starts = ends - counts
    first = inv[order[starts]]
    total = _sums(per, n)
    pinned = live & old[log_of]
    frees = pinned & sole[log_of]
    nb, lb = total(nbytes), total(np.where(live, nbytes, 0))
    pinned_n, sole_n, frees_b = total(pinned), total(frees), total(np.where(frees, sizes[log_of], 0))
    any_live = total(np.array([x == live_state for x in states], bool)[inv])
    refs = [(lg.ledger_dir, lg.log_id) for lg in logs]
    log_at = log_of[order].tolist()
    rows = []
    for j, (k, a, b) in enumerate(zip(first.tolist(), starts.tolist(), ends.tolist(), strict=True)):
        rows.append({
            "kind": "ledger", "bookie_id": bookie_id, "ledger": str(LedgerId(int(uscope[j]), int(uledger[j]))),
            "state": live_state if any_live[j] else states[k],
            "metadata_state": md_states[k], "topic": topics[k], "bytes": nb[j],
            "live_bytes": lb[j], "garbage_bytes": nb[j] - lb[j],
            "logs": [{"ledger_dir": refs[i][0], "log_id": refs[i][1]} for i in log_at[a:b]],
            "pinned_logs": pinned_n[j], "sole_logs": sole_n[j], "frees_bytes": frees_b[j]})
    return sorted(rows, key=lambda x: (-x["frees_bytes"], -x["bytes"], x["ledger"]))


def per_topic(ledger_rows, live, log_of, inv, topics, old, sizes, bookie_id) -> list[dict[str, Any]]:
    """One row per topic of the ledgers: their bytes, and the logs its live ledgers pin (a log
    considered for collection whose live ledgers all belong to the topic is freed by deleting it)."""
    per: dict[str, dict[str, Any]] = {}
    for lr in ledger_rows:
        t = lr["topic"]
        if t is None:
            continue
        row = per.setdefault(t, {"kind": "topic", "bookie_id": bookie_id, "topic": t, "ledgers": 0, "bytes": 0,
                                 "live_bytes": 0, "garbage_bytes": 0, "pinned_logs": 0, "sole_logs": 0,
                                 "frees_bytes": 0})
        row["ledgers"] += 1
        for k in ("bytes", "live_bytes", "garbage_bytes"):
            row[k] += lr[k]
    if per:
        names = sorted(per)
        number = {t: i for i, t in enumerate(names)}
        topic_id = np.array([number.get(t, -1) if t is not None else -1 for t in topics], np.int64)
        # The distinct (log, topic) pairs of the live rows (-1: a ledger of no topic).
        (plog, ptopic), _ = distinct_rows(log_of[live], topic_id[inv[live]])
        considered = old[plog]
        kinds = np.bincount(plog, minlength=len(old))   # topics (no topic among them) a log's live ledgers hold
        pinned = np.bincount(ptopic[considered & (ptopic >= 0)], minlength=len(names))
        alone = considered & (ptopic >= 0) & (kinds[plog] == 1)
        sole = np.bincount(ptopic[alone], minlength=len(names))
        frees = np.zeros(len(names), np.int64)
        np.add.at(frees, ptopic[alone], sizes[plog[alone]])
        for i, t in enumerate(names):
            per[t]["pinned_logs"] += int(pinned[i])
            per[t]["sole_logs"] += int(sole[i])
            per[t]["frees_bytes"] += int(frees[i])
    return sorted(per.values(), key=lambda x: (-x["frees_bytes"], -x["bytes"], x["topic"]))
