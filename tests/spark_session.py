"""One local[2] Spark session for every test module that audits in-process (each Spark start costs
tens of seconds): ``from spark_session import shared_spark``. Kept until the test process exits;
a module that stopped it gets a new one."""
from __future__ import annotations

import atexit

_current = None


def shared_spark():
    global _current
    from audit.job import spark_session
    if _current is None or _current.sparkContext._jsc is None:   # none yet, or stopped by someone
        first = _current is None
        _current = spark_session("local[2]", {"spark.sql.shuffle.partitions": "4"})
        if first:
            atexit.register(_stop)
    return _current


def _stop() -> None:
    if _current is not None and _current.sparkContext._jsc is not None:
        _current.stop()
