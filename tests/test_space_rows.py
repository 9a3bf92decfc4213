"""The space report's ledger and topic rows, summed at once over the (log, ledger) rows
(bookie.space_rows), against the rows built one (log, ledger) row at a time: random logs, ledgers in
several groups (DbLedgerStorage's dirs), states, topics, logs considered for collection or not."""
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie.space_rows import Coded, _names, decimal_text_keys, per_ledger, per_topic
from bkdisk.diskio.distinct import distinct_rows
from bkdisk.formats.ids import LedgerId

LIVE = "live"
STATES = (LIVE, "deleted", "not-indexed")


@dataclass
class Log:
    ledger_dir: str
    log_id: int


@dataclass
class Meta:
    state: str


def _by_row(logs, scope, ledger, nbytes, log_of, inv, live, states, metas, topics, old, sole, sizes, bid):
    per: dict = {}
    for r in range(len(ledger)):
        k, s, l = int(inv[r]), int(scope[r]), int(ledger[r])
        row = per.get((s, l))
        if row is None:
            m = metas[k]
            row = per[(s, l)] = {"kind": "ledger", "bookie_id": bid, "ledger": str(LedgerId(s, l)), "state": states[k],
                                 "metadata_state": None if m is None else m.state, "topic": topics[k], "bytes": 0,
                                 "live_bytes": 0, "garbage_bytes": 0, "logs": [], "pinned_logs": 0, "sole_logs": 0,
                                 "frees_bytes": 0}
        elif states[k] == LIVE:
            row["state"] = LIVE
        i, b = int(log_of[r]), int(nbytes[r])
        row["bytes"] += b
        row["live_bytes" if live[r] else "garbage_bytes"] += b
        row["logs"].append({"ledger_dir": logs[i].ledger_dir, "log_id": logs[i].log_id})
        if live[r] and old[i]:
            row["pinned_logs"] += 1
            if sole[i]:
                row["sole_logs"] += 1
                row["frees_bytes"] += int(sizes[i])
    ledger_rows = sorted(per.values(), key=lambda x: (-x["frees_bytes"], -x["bytes"], x["ledger"]))
    tp: dict = {}
    for lr in ledger_rows:
        if lr["topic"] is not None:
            t = tp.setdefault(lr["topic"], {"kind": "topic", "bookie_id": bid, "topic": lr["topic"], "ledgers": 0,
                                            "bytes": 0, "live_bytes": 0, "garbage_bytes": 0, "pinned_logs": 0,
                                            "sole_logs": 0, "frees_bytes": 0})
            t["ledgers"] += 1
            for k in ("bytes", "live_bytes", "garbage_bytes"):
                t[k] += lr[k]
    live_topics: dict = {}
    for r in np.flatnonzero(live).tolist():
        live_topics.setdefault(int(log_of[r]), set()).add(topics[int(inv[r])])
    for i, ts in live_topics.items():
        if old[i]:
            for t in ts - {None}:
                tp[t]["pinned_logs"] += 1
            if len(ts) == 1 and None not in ts:
                t = next(iter(ts))
                tp[t]["sole_logs"] += 1
                tp[t]["frees_bytes"] += int(sizes[i])
    return ledger_rows, sorted(tp.values(), key=lambda x: (-x["frees_bytes"], -x["bytes"], x["topic"]))


# Byte counts up to 2**58: a ledger's sum over a few dozen rows passes 2**53, where a float64 sum rounds.
ROW = st.tuples(st.integers(0, 5), st.integers(0, 1), st.sampled_from([0, 0, 3, 2**64 - 1]),
                st.sampled_from([0, 1, 2, 7, 2**63, 2**64 - 1]),
                st.one_of(st.integers(1, 1 << 40), st.integers((1 << 53) - 3, 1 << 58)))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(ROW, max_size=40), picks=st.lists(st.integers(0, 10**6), min_size=64, max_size=64),
       topic_names=st.lists(st.sampled_from([None, "persistent://t/a", "persistent://t/b", "c"]), min_size=1,
                            max_size=4), old=st.lists(st.booleans(), min_size=6, max_size=6),
       sole=st.lists(st.booleans(), min_size=6, max_size=6))
def test_ledger_and_topic_rows_equal_those_built_row_by_row(rows, picks, topic_names, old, sole):
    logs = [Log(f"dir{i % 2}", 10 + i) for i in range(6)]
    log_of = np.array([r[0] for r in rows], np.int64)
    group = np.array([r[1] for r in rows], np.int64)
    scope = np.array([r[2] for r in rows], np.uint64)
    ledger = np.array([r[3] for r in rows], np.uint64)
    nbytes = np.array([r[4] for r in rows], np.int64)
    (ug, us, ul), inv = distinct_rows(group, scope, ledger)
    n = len(ul)
    states = [STATES[picks[k % 64] % 3] for k in range(n)]
    metas = [None if picks[(k + 7) % 64] % 3 == 0 else Meta("CLOSED") for k in range(n)]
    # a ledger's metadata and topic are the same in every group
    key_topic = {(int(s), int(l)): topic_names[picks[(int(l) % 61)] % len(topic_names)] for s, l in zip(us, ul)}
    topics = [key_topic[(int(s), int(l))] for s, l in zip(us, ul)]
    live = np.array([states[int(k)] == LIVE for k in inv], bool)
    old_a, sole_a = np.array(old), np.array(sole) & np.array(old)
    sizes = np.array([(1 << 53) + 1 + i for i in range(6)], np.int64)   # (freed bytes summed exactly too)
    args = (logs, scope, ledger, nbytes, log_of, inv, live)
    want_l, want_t = _by_row(*args, states, metas, topics, old_a, sole_a, sizes, "bk:3181")
    coded_topics = Coded.of(topics)   # (per (group, ledger): a code each, each value once)
    (ls, ll), per = distinct_rows(scope, ledger)
    rest = (nbytes, log_of, inv, live)
    got_l = per_ledger(logs, (ls, ll, per), *rest, Coded.of(states), LIVE,
                       Coded.of([None if m is None else m.state for m in metas]), coded_topics, old_a, sole_a, sizes,
                       "bk:3181")
    assert list(got_l) == want_l and [got_l[k] for k in range(len(got_l))] == want_l == got_l[:]
    if len(set(group.tolist())) <= 1:   # one group: the (group, ledger) rows are the ledgers
        given_l = per_ledger(logs, (us, ul, inv), *rest, Coded.of(states), LIVE,
                             Coded.of([None if m is None else m.state for m in metas]), Coded.of(topics), old_a,
                             sole_a, sizes, "bk:3181")
        assert list(given_l) == want_l
    assert all(type(r["bytes"]) is int and type(r["frees_bytes"]) is int for r in got_l)
    assert per_topic(got_l, live, log_of, inv, coded_topics, old_a, sizes, "bk:3181") == want_t
    assert len(coded_topics.values) == len(set(topics)) and list(coded_topics) == topics == coded_topics[:]


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.tuples(st.sampled_from([0, 0, 1, 2**64 - 1]), st.integers(0, 2**64 - 1) | st.integers(0, 99)),
                    max_size=30), part=st.integers(1, 7))
def test_ledger_names_made_a_part_at_a_time_sort_as_their_text(ids, part):
    scope = np.array([s for s, _ in ids], np.uint64)
    ledger = np.array([led for _, led in ids], np.uint64)
    got = _names(scope, ledger, part)
    text = [str(LedgerId(s, led)) for s, led in ids]
    assert [b.decode() for b in got.tolist()] == text
    assert np.argsort(got, kind="stable").tolist() == sorted(range(len(ids)), key=lambda i: text[i])


def test_a_topic_only_a_later_group_names_is_no_topic_row():
    """(a ledger's row takes its first group's topic: a topic no ledger row has is not a row of 0 ledgers)"""
    logs = [Log("dir0", 1), Log("dir1", 2)]
    scope, ledger = np.zeros(2, np.uint64), np.full(2, 7, np.uint64)
    nbytes, log_of, inv = np.array([10, 20], np.int64), np.array([0, 1]), np.array([0, 1])
    live, old, sole = np.ones(2, bool), np.ones(2, bool), np.zeros(2, bool)
    (ls, ll), per = distinct_rows(scope, ledger)
    topics = Coded.of(["persistent://t/a", "persistent://t/b"])   # per (group, ledger)
    rows = per_ledger(logs, (ls, ll, per), nbytes, log_of, inv, live, Coded.of([LIVE, LIVE]), LIVE,
                      Coded.of(["CLOSED", "CLOSED"]), topics, old, sole, np.array([100, 200], np.int64), "bk:3181")
    got = per_topic(rows, live, log_of, inv, topics, old, np.array([100, 200], np.int64), "bk:3181")
    assert [(r["topic"], r["ledgers"], r["bytes"]) for r in got] == [("persistent://t/a", 1, 30)]


EDGE_IDS = [0, 1, 9, 10, 11, 99, 100, 10**18, 10**19 - 1, 10**19, 2**63, 2**64 - 1]


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.sampled_from(EDGE_IDS) | st.integers(0, 2**64 - 1) | st.integers(0, 200), max_size=30),
       part=st.integers(1, 7))
def test_decimal_keys_sort_ids_as_their_text(ids, part):
    hi, lo = decimal_text_keys(np.array(ids, np.uint64), part)
    order = np.lexsort((lo, hi)).tolist()
    assert [str(ids[i]) for i in order] == sorted(str(x) for x in ids)
    assert all((hi[i], lo[i]) == (hi[j], lo[j]) for i in range(len(ids)) for j in range(len(ids)) if ids[i] == ids[j])


@settings(max_examples=100, deadline=None)
@given(ids=st.sets(st.sampled_from(EDGE_IDS) | st.integers(0, 2**64 - 1), min_size=1, max_size=20),
       scoped=st.booleans())
def test_ledgers_of_equal_bytes_are_shown_in_the_order_of_their_names(ids, scoped):
    """(unscoped ledgers sorted by numeric keys of their text, scoped ones by the text itself: the same order)"""
    ids = sorted(ids)
    n = len(ids)
    scope = np.array([5 if scoped and i == 0 else 0 for i in range(n)], np.uint64)
    ledger = np.array(ids, np.uint64)
    rows = per_ledger([Log("d", 1)], (scope, ledger, np.arange(n)), np.full(n, 10, np.int64), np.zeros(n, np.int64),
                      np.arange(n), np.ones(n, bool), Coded.of([LIVE] * n), LIVE, Coded.of([None] * n),
                      Coded.of([None] * n), np.zeros(1, bool), np.zeros(1, bool), np.array([100], np.int64), "bk:3181")
    assert [r["ledger"] for r in rows] == sorted(str(LedgerId(int(s), int(x))) for s, x in zip(scope, ledger))


def test_a_coded_column_refuses_a_value_under_two_codes():
    import pytest
    with pytest.raises(ValueError, match="expected distinct values, found 1 repeated"):
        Coded(["a", "b", "a"], np.zeros(3, np.int32))
    assert list(Coded(["a", None], np.array([1, 0, 1], np.int32))) == [None, "a", None]
