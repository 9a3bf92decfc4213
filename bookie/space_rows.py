"""The space report's ledger and topic rows, from its (log, ledger) arrays: each summed over the rows
at once (numpy), the Python work one step per ledger and per topic, not per (log, ledger) row: a busy
bookie's logs each name thousands of ledgers."""
from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from bkdisk.diskio.distinct import distinct_rows
from bkdisk.formats.ids import LedgerId

NAME_WIDTH = 32   # characters of the longest name: a scoped id's 32 hex digits (a ledger alone: 20 digits)


def _sums(group: np.ndarray, n: int):
    """Per group of ``group`` (0..n-1), the sum of ``values``, added as int64 (exact, where a float64 sum
    would round above 2**53 bytes)."""
    def total(values: np.ndarray) -> np.ndarray:
        out = np.zeros(n, np.int64)
        np.add.at(out, group, np.asarray(values).astype(np.int64, copy=False))
        return out
    return total


def _names(scope: np.ndarray, ledger: np.ndarray, part: int = 1 << 16) -> np.ndarray:
    """Each ledger's id as its rows show it (bytes, for sorting), made a part at a time: a million
    ledgers' names as one list of strings first would cost twice the array."""
    names = np.empty(len(ledger), f"S{NAME_WIDTH}")
    for lo in range(0, len(ledger), part):
        names[lo:lo + part] = [str(LedgerId(s, led)).encode()
                               for s, led in zip(scope[lo:lo + part].tolist(), ledger[lo:lo + part].tolist())]
    return names


_POW10 = np.array([10 ** k for k in range(20)], np.uint64)


def decimal_text_keys(ids: np.ndarray, part: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Two int64 keys per uint64 id that sort as its decimal text does ("10" before "9"): its 20 digit places
    from the left, each its digit + 1 or 0 past its last digit, as two numbers of ten base-11 places; made a
    part at a time. A million ids' names as strings, made only to be sorted, cost a second and 32 bytes each."""
    ids = np.asarray(ids, np.uint64)
    keys = (np.zeros(len(ids), np.int64), np.zeros(len(ids), np.int64))
    for lo in range(0, len(ids), part):
        x = ids[lo:lo + part]
        digits = np.searchsorted(_POW10, x, "right")   # (10^(d-1) <= x < 10^d; 0 has one digit)
        digits[digits == 0] = 1
        for place in range(20):
            e = digits - 1 - place   # the power of ten of this place's digit; < 0: past the last digit
            symbol = np.where(e >= 0, (x // _POW10[np.maximum(e, 0)]) % np.uint64(10) + np.uint64(1), np.uint64(0))
            half = keys[place // 10][lo:lo + part]
            half *= 11
            half += symbol.astype(np.int64)
    return keys


class Coded(Sequence):
    """A column of values that a million rows share a few of (states, topics): a code a row (int32) and
    each distinct value once, read as the list of values it stands for. ``add`` appends a row."""

    def __init__(self, values: list | None = None, codes: np.ndarray | None = None):
        self.values: list = [] if values is None else values
        self._number = {v: i for i, v in enumerate(self.values)}
        if len(self._number) != len(self.values):   # (a value under two codes would be counted apart)
            raise ValueError(f"expected distinct values, found {len(self.values) - len(self._number)} repeated")
        self._adding = array("i")
        self._codes = np.zeros(0, np.int32) if codes is None else codes

    @classmethod
    def of(cls, rows) -> Coded:
        c = cls()
        for v in rows:
            c.add(v)
        return c

    def add(self, v) -> None:
        self._adding.append(self.code_of(v))

    def code_of(self, v) -> int:
        """The code of ``v``, given one when no row has it."""
        k = self._number.get(v)
        if k is None:
            k = self._number[v] = len(self.values)
            self.values.append(v)
        return k

    @property
    def codes(self) -> np.ndarray:
        if len(self._adding):
            self._codes = np.concatenate([self._codes, np.frombuffer(self._adding, np.int32)])
            self._adding = array("i")
        return self._codes

    def take(self, rows: np.ndarray) -> Coded:
        """The rows ``rows`` (indices) as a column of their own."""
        return Coded(self.values, self.codes[rows])

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.values[k] for k in self.codes[i].tolist()]
        return self.values[int(self.codes[i])]

    def __iter__(self) -> Iterator:
        values, codes = self.values, self.codes
        for lo in range(0, len(codes), 1 << 16):
            yield from (values[k] for k in codes[lo:lo + (1 << 16)].tolist())


class LedgerRows(Sequence):
    """The ledger rows in the order shown (freeing most first, then most bytes, then the id as text), each
    made when asked for: a bookie of a million ledgers keeps its rows as a dozen columns, not a million
    dicts and their lists of logs."""

    def __init__(self, bookie_id, scope, ledger, state, md_state, topic, sums: dict[str, np.ndarray], refs, log_at,
                 starts, ends):
        self.bookie_id, self.scope, self.ledger = bookie_id, scope, ledger
        self.state, self.md_state, self.topic = state, md_state, topic   # per ledger (Coded)
        self.sums, self.refs, self.log_at, self.starts, self.ends = sums, refs, log_at, starts, ends
        by_name = decimal_text_keys(ledger)[::-1] if not np.any(scope) else (_names(scope, ledger),)
        self.order = np.lexsort((*by_name, -sums["bytes"], -sums["frees_bytes"]))

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.row(j) for j in self.order[i].tolist()]
        return self.row(int(self.order[i]))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for lo in range(0, len(self.order), 1 << 16):
            yield from (self.row(j) for j in self.order[lo:lo + (1 << 16)].tolist())

    def row(self, j: int) -> dict[str, Any]:
        """Ledger ``j``'s row (in id order, not the order shown)."""
        sums, refs = self.sums, self.refs
        nb, lb = int(sums["bytes"][j]), int(sums["live_bytes"][j])
        return {
            "kind": "ledger", "bookie_id": self.bookie_id, "ledger": str(LedgerId(int(self.scope[j]),
                                                                                 int(self.ledger[j]))),
            "state": self.state[j], "metadata_state": self.md_state[j], "topic": self.topic[j], "bytes": nb,
            "live_bytes": lb, "garbage_bytes": nb - lb,
            "logs": [{"ledger_dir": refs[i][0], "log_id": refs[i][1]}
                     for i in self.log_at[self.starts[j]:self.ends[j]].tolist()],
            "pinned_logs": int(sums["pinned_logs"][j]), "sole_logs": int(sums["sole_logs"][j]),
            "frees_bytes": int(sums["frees_bytes"][j])}


def per_ledger(logs, ledgers, nbytes, log_of, inv, live, states, live_state: str, md_states, topics, old, sole, sizes,
               bookie_id) -> LedgerRows:
    """One row per ledger (across groups, DbLedgerStorage's dirs: in the state of its first,
    ``live_state`` where any keeps it), its logs in the order of its rows; the ledgers freeing most
    first. ``ledgers``: the distinct (scope, ledger) of the rows and each row's (``distinct_rows``);
    ``inv``: each row's (group, ledger), whose state, metadata's state and topic are ``states``,
    ``md_states``, ``topics``."""
    uscope, uledger, per = ledgers
    n = len(uledger)
    order = np.argsort(per, kind="stable")   # each ledger's rows together, in row order
    counts = np.bincount(per, minlength=n)   # (every ledger has a row)
    ends = np.cumsum(counts)
    starts = ends - counts
    first = inv[order[starts]] if n else np.zeros(0, np.int64)
    total = _sums(per, n)
    pinned = live & old[log_of]
    frees = pinned & sole[log_of]
    sums = {"bytes": total(nbytes), "live_bytes": total(np.where(live, nbytes, 0)), "pinned_logs": total(pinned),
            "sole_logs": total(frees), "frees_bytes": total(np.where(frees, sizes[log_of], 0))}
    live_code = states.code_of(live_state)
    any_live = total((states.codes == live_code)[inv]) > 0
    state = Coded(states.values, np.where(any_live, live_code, states.codes[first]).astype(np.int32))
    return LedgerRows(bookie_id, uscope, uledger, state, md_states.take(first), topics.take(first),
                      sums, [(lg.ledger_dir, lg.log_id) for lg in logs], log_of[order], starts, ends)


def per_topic(ledger_rows: LedgerRows, live, log_of, inv, topics, old, sizes, bookie_id) -> list[dict[str, Any]]:
    """One row per topic of the ledgers: their bytes, and the logs its live ledgers pin (a log
    considered for collection whose live ledgers all belong to the topic is freed by deleting it)."""
    per: dict[str, dict[str, Any]] = {}
    # Summed per topic code (a million ledgers share a few topics; each value is one code)
    coded = ledger_rows.topic
    total = _sums(coded.codes, len(coded.values))
    count = np.bincount(coded.codes, minlength=len(coded.values))
    nb, lb = total(ledger_rows.sums["bytes"]), total(ledger_rows.sums["live_bytes"])
    for t, k, b, live_b in zip(coded.values, count.tolist(), nb.tolist(), lb.tolist(), strict=True):
        if t is not None and k:
            per[t] = {"kind": "topic", "bookie_id": bookie_id, "topic": t, "ledgers": k, "bytes": b,
                      "live_bytes": live_b, "garbage_bytes": b - live_b, "pinned_logs": 0, "sole_logs": 0,
                      "frees_bytes": 0}
    if per:
        names = sorted(per)
        number = {t: i for i, t in enumerate(names)}
        topic_id = np.array([number.get(t, -1) if t is not None else -1 for t in topics.values], np.int64)[topics.codes]
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
