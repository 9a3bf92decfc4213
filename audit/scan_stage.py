"""The scan stage: one Spark task per disk, in waves, so that a disk naming its host is read there.

Spark's delay scheduling keeps a task set at the node level while any of its tasks prefers a host
(alive or not), so a long wait would hold the disks of a lost or absent host as long as that; a
short one (``spark.locality.wait.node``, 3 s) sends the second disk of a busy host elsewhere.
So the wait stays short, a task that lands on the wrong host reports its disk without reading it,
and the driver runs such disks again, in a new wave, when their host has a live executor; a disk
whose host has none keeps its ``not_audited`` row. Each wave's rows are written once (Parquet)
and read back by the tables: a lost executor's cached rows would make Spark scan a disk again.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable

from bkdisk.audit.errors import AuditError, first_line
from bkdisk.audit.placement import WRONG_HOST, live_hosts, located_rdd
from bkdisk.audit.rows import TASK_SCHEMA, DiskInput, table_schema


class Progress(threading.Thread):
    """Reports finished scan tasks while a wave runs (Spark's status tracker): ``offset`` disks
    were done before it, ``total`` are to do in all."""

    def __init__(self, spark, wave: int, offset: int, total: int, report: Callable[[int, int, int], None]):
        super().__init__(daemon=True)
        self.tracker, self.report = spark.sparkContext.statusTracker(), report
        self.wave, self.offset, self.total = wave, offset, total
        self.stop = threading.Event()
        self.last = (-1, -1)

    def run(self) -> None:
        while not self.stop.wait(0.25):
            now = (0, 0)
            for sid in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(sid)
                if info is not None and info.numTasks == self.wave:
                    now = max(now, (info.numCompletedTasks, info.numActiveTasks))
            if now != self.last and any(now):
                self.last = now
                self.report(self.offset + now[0], now[1], self.total)


def scan_disks(spark, disks: list[DiskInput], task, rows_dir: str,
               progress: Callable[[int, int, int], None] | None = None) -> tuple[list[dict], list[str]]:
    """Scan ``disks`` (``task``: audit.job.disk_task's function) in waves; returns each disk's final
    row and the folders of the rows the waves wrote."""
    from pyspark.sql import functions as F  # the optional extra 'audit', as in audit.job
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = "path string, bookie_id string, index long, host string"
    final: dict[int, dict] = {}
    todo = list(range(len(disks)))
    folders: list[str] = []
    for wave in range(len(disks) + 1):   # each wave scans at least one disk of every live host
        if not todo:
            break
        rdd = located_rdd(spark.sparkContext, [(disks[i].path, disks[i].bookie_id, i, disks[i].host) for i in todo],
                          [disks[i].host for i in todo])
        folders.append(os.path.join(rows_dir, f"wave-{wave}"))
        watcher = Progress(spark, len(todo), len(final), len(disks), progress) if progress else None
        if watcher:
            watcher.start()
        try:
            spark.createDataFrame(rdd, schema).mapInArrow(task, from_arrow_schema(TASK_SCHEMA)).write.parquet(
                folders[-1])
        except Exception as e:   # noqa: BLE001 - Py4J and PySpark errors: one line, not a JVM stack
            raise AuditError(f"the scan stage failed: {first_line(e)}") from None
        finally:
            if watcher:
                watcher.stop.set()
        rows = spark.read.schema(from_arrow_schema(TASK_SCHEMA)).parquet(folders[-1])
        got = {r["path"]: r.asDict() for r in rows.filter(F.col("table") == "disks")
               .select(*[f.name for f in table_schema("disks")]).collect()}
        alive = live_hosts(spark.sparkContext)
        again = []
        for i in todo:
            row = got[disks[i].path]
            moved = row["status"] == "not_audited" and (row["error"] or "").startswith(WRONG_HOST)
            if moved and disks[i].host in alive and wave < len(disks):
                again.append(i)
            else:
                final[i] = row
        todo = again
        if progress:
            progress(len(final), 0, len(disks))
    return [final[i] for i in range(len(disks))], folders
