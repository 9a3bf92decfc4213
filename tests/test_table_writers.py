"""The audit's tables written from several threads at once (audit/job.py write_tables) and the frames
the fault tables share built once (audit/tables.py fault_tables)."""
from __future__ import annotations

import os
import threading
import time

import pyarrow.parquet as pq
import pytest
from spark_session import shared_spark

from bkdisk.audit import job, tables

pytestmark = pytest.mark.slow   # a real Spark session


@pytest.fixture(scope="module")
def spark():
    return shared_spark()


def _frame(spark, n: int):
    return spark.createDataFrame([(i % 3, n - i, "b") for i in range(n)],
                                 "bookie_id long, path long, x string")


def test_every_table_is_written_whole_and_sorted_whatever_the_writers(spark, tmp_path, monkeypatch):
    monkeypatch.setitem(tables.ORDER, "t1", ["bookie_id", "path"])
    monkeypatch.setitem(tables.ORDER, "t2", ["path"])
    monkeypatch.setitem(tables.ORDER, "t3", ["bookie_id", "path"])
    frames = {"t1": _frame(spark, 50), "t2": _frame(spark, 7), "t3": _frame(spark, 0)}
    got = {}
    for writers in (1, 4):
        out = tmp_path / f"w{writers}"
        job.write_tables(spark, {n: (lambda f=f: f) for n, f in frames.items()}, str(out), writers=writers)
        got[writers] = {n: pq.read_table(out / n).to_pylist() for n in frames}
    assert got[1] == got[4]
    assert got[4]["t1"] == sorted(got[4]["t1"], key=lambda r: (r["bookie_id"], r["path"]))
    assert got[4]["t2"] == sorted(got[4]["t2"], key=lambda r: r["path"])
    assert [len(got[4][n]) for n in frames] == [50, 7, 0]
    assert all(len([f for f in os.listdir(tmp_path / "w4" / n) if f.endswith(".parquet")]) == 1 for n in frames)


def test_a_table_that_fails_cancels_the_writes_running_beside_it_and_its_error_is_raised(spark, tmp_path,
                                                                                        monkeypatch):
    from pyspark.sql import functions as F
    monkeypatch.setitem(tables.ORDER, "slow", ["path"])
    monkeypatch.setitem(tables.ORDER, "bad", ["path"])
    slept = F.udf(lambda v: time.sleep(3600) or v, "long")   # a write that would hold the call an hour

    def bad():
        time.sleep(2)   # (the slow write's job has started)
        raise RuntimeError("the plan of table bad cannot be built")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="table bad"):
        job.write_tables(spark, {"slow": lambda: _frame(spark, 4).select(slept("path").alias("path")),
                                 "bad": bad}, str(tmp_path), writers=2)
    assert time.monotonic() - started < 600   # it did not wait for the slow write: that was cancelled
    assert not (tmp_path / "slow" / "_SUCCESS").exists()
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []


def test_the_shared_frames_are_built_once_when_threads_ask_at_once():
    calls = []

    def build():
        calls.append(1)
        time.sleep(0.2)
        return object()
    get = tables._once(build)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(get())) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(seen) == 6 and all(s is seen[0] for s in seen)
