"""A repair plan says what the bookie answers afterwards for each lost entry, names every entry its
metadata places here that the rebuild cannot bring back, and does not list as remaining what the
rebuild restores. On copies of a real BookKeeper disk (interleaved-v4-smallpage: ledger 0x1234, 300
entries, its last ones at the end of 4.log)."""
from __future__ import annotations

import os

from test_fsck_golden_faults import _clean_copy

from bkdisk.fsck.repair.repairs import plan_repairs

LEDGER = 0x1234


def _plan(c, **kw):
    return plan_repairs(c.check(), **kw)


def _cut_last_entry(c) -> None:
    os.truncate(os.path.join(c.root, "ledgers", "current", "4.log"),
                os.path.getsize(os.path.join(c.root, "ledgers", "current", "4.log")) - 100)


def _lines(plan, start: str) -> list[str]:
    return [x for x in plan.lines() if x.startswith(start)]


def test_a_rebuild_dropping_lost_entries_says_they_are_dropped(tmp_path):
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    _cut_last_entry(c)
    [kept] = _lines(_plan(c), "lost:")
    assert kept.endswith("the index keeps pointing where it pointed (reads fail, never 'no such entry')")
    [dropped] = _lines(_plan(c, drop_lost_entries=True), "lost:")
    assert f"ledger {LEDGER} entries 299 are in no entry log" in dropped
    assert dropped.endswith("the rebuilt index drops them: this bookie answers 'no such entry' for them until "
                            "they are recovered")


def test_entries_placed_here_that_no_index_points_at_and_no_log_holds_are_named_lost(tmp_path):
    """The index gone and the log cut short: the rebuild serves entries 0-298 (the bookie serves none now)
    and runs; entry 299, which the metadata places here, is named lost with the command that recovers it."""
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    os.remove(c.index_path(LEDGER))
    _cut_last_entry(c)
    plan = _plan(c)
    assert [a.kind for a in plan.todo] == ["rebuild-index"]
    [lost] = _lines(plan, "lost:")
    assert lost == (f"lost: ledger {LEDGER} entries 299 are in no entry log; its metadata places them on this bookie "
                    "and no index points at them: it answers 'no such entry' for them until they are recovered")
    assert plan.recover_command and f"recover -l {LEDGER} " in plan.recover_command
    assert plan.to_json()["lost_entries"] == [{"scope": 0, "ledger": LEDGER, "entries": [299]}]
    assert "ENTRIES_MISSING" in {f.code for f in plan.remaining}   # (entry 299 stays missing)


def test_what_the_rebuild_restores_is_not_said_to_remain(tmp_path):
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    os.remove(c.index_path(LEDGER))
    report = c.check()
    assert {"LEDGER_NOT_INDEXED", "ENTRIES_MISSING"} <= {f.code for f in report.findings}
    plan = plan_repairs(report)
    assert not plan.unindexed and not plan.lost
    assert {f.code for f in plan.remaining} == {"COOKIE_DIR_ELSEWHERE"}
