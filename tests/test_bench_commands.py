"""bench/commands_bench.py's figures: the files each raw read covers, ratios after start-up paired per
round, and the verdict lines against the target."""
from __future__ import annotations

import math
import os
import sys

import pytest

from bench import bulk_bookie, commands_bench


@pytest.fixture(scope="module")
def db_bookie(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("cmd") / "bookie")
    old = bulk_bookie.LOG_LIMIT
    bulk_bookie.LOG_LIMIT = 1 << 20
    try:
        bulk_bookie.build(root, 0.004, 30, 100, 1000, 5, storage="rocksdb")
    finally:
        bulk_bookie.LOG_LIMIT = old
    return root


def test_entry_logs_are_the_ledger_dirs_logs_not_a_databases_wal(db_bookie):
    logs = commands_bench.entry_logs(db_bookie)
    cur = os.path.join(db_bookie, "ledgers", "current")
    assert logs and all(os.path.dirname(p) == cur for p in logs)
    db = commands_bench.database_files(db_bookie)
    assert {os.path.basename(os.path.dirname(p)) for p in db} == {"locations", "ledgers"}
    assert any(p.endswith(".log") for p in db) and any(p.endswith(".sst") for p in db)
    assert not set(db) & set(logs) and commands_bench.index_files(db_bookie) == []


def test_ratio_after_start_up_pairs_each_command_with_its_own_start_up():
    # Round 2's slow command came with a slow start-up (a busy moment): paired, it is as fast as round 1.
    raw, command, startup = [1.0, 1.0, 1.0], [2.0, 5.0, 3.0], [1.0, 4.0, 1.0]
    assert commands_bench.after_startup(raw, command, startup) == 1.0
    assert math.isnan(commands_bench.after_startup([1.0], [0.5], [0.6]))


def test_summary_holds_fsck_to_every_byte_and_inventory_to_the_logs():
    raw = {"logs": [1.0, 1.0], "logs cpu": [1.0, 1.0], "all": [3.0, 3.0], "all cpu": [2.0, 2.0]}
    res = {label: {"t": [2.5, 2.5], "rss": [10.0, 20.0], "cpu": [3.0, 3.0], "t0": [0.5, 0.5], "cpu0": [0.5, 0.5]}
           for label in ("bookie-fsck ROOT", "bkdisk inventory ROOT")}
    rows = commands_bench.summary(raw, res)
    fsck, inv = rows["bookie-fsck ROOT"], rows["bkdisk inventory ROOT"]
    assert (fsck["x"], fsck["x cpu"], fsck["x whole"], fsck["rss"], fsck["after"]) == (1.5, 0.8, 1.2, 20.0, 2.0)
    assert (inv["x"], inv["x cpu"], inv["x whole"]) == (0.5, 0.4, 0.4)


def test_verdicts_name_each_scanning_command_met_or_missed():
    row = {"x": 0.0, "x cpu": 0.5}
    rows = {"bkdisk --help": dict(row, x=9.0), "bkdisk inventory ROOT": dict(row, x=0.81),
            "bookie-fsck ROOT": dict(row, x=0.79), commands_bench.FLOOR_LABEL: dict(row, x=0.1)}
    lines = commands_bench.verdicts(rows)
    assert len(lines) == 2
    assert lines[0].startswith("target met ")
    assert "bkdisk inventory ROOT: 0.81 x a raw read of the entry logs" in lines[0]
    assert lines[1].startswith("target MISSED ") and "bookie-fsck ROOT: 0.79 x a raw read of every byte" in lines[1]


def test_measure_rounds_runs_a_start_up_before_each_command(db_bookie):
    cmds = [("true", [sys.executable, "-c", "pass"], None, (0,))]
    raw, res = commands_bench.measure_rounds(db_bookie, cmds, 2, 1 << 20, startup=True)
    assert all(len(v) == 2 and min(v) > 0 for v in raw.values())
    assert raw["all"][0] > raw["logs"][0]
    r = res["true"]
    assert len(r["t0"]) == 2 and min(r["t0"]) > 0 and min(r["cpu0"]) > 0 and min(r["t"]) > 0
    raw, res = commands_bench.measure_rounds(db_bookie, cmds, 1, 1 << 20)
    assert res["true"]["t0"] == [0.0]
