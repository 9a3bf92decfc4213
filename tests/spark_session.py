"""One Spark session for every test module that audits in-process (each Spark start costs tens of
seconds): ``from spark_session import shared_spark``. Kept until the test process exits; a module
that stopped it gets a new one.

The session is ``local[2]``; with ``BKDISK_TEST_MASTER=standalone`` it is a standalone cluster's
instead (a master and three workers on 127.0.0.1-127.0.0.4, started here and stopped at exit), so
that the same audit tests run on both masters."""
from __future__ import annotations

import atexit
import os
import tempfile
from pathlib import Path

_current = None
_cluster = None


def shared_spark():
    global _current, _cluster
    from bkdisk.audit.job import spark_session
    if _current is None or _current.sparkContext._jsc is None:   # none yet, or stopped by someone
        first = _current is None
        if first:
            atexit.register(_stop)
        master, conf = "local[2]", {"spark.sql.shuffle.partitions": "4"}
        if os.environ.get("BKDISK_TEST_MASTER") == "standalone":
            from spark_cluster import CLUSTER_CONF, start_cluster
            if _cluster is None:
                _cluster = start_cluster(Path(tempfile.mkdtemp(prefix="bkdisk-standalone-")),
                                         ["127.0.0.2", "127.0.0.3", "127.0.0.4"])
            master, conf = _cluster.master_url, dict(CLUSTER_CONF)
        _current = spark_session(master, conf)
    return _current


def scan_hosts() -> set[str]:
    """The hosts a disk's task may run on: this machine locally, the workers' on the cluster."""
    import socket
    if os.environ.get("BKDISK_TEST_MASTER") == "standalone":
        return {"127.0.0.2", "127.0.0.3", "127.0.0.4"}
    return {socket.gethostname()}


def _stop() -> None:
    if _current is not None and _current.sparkContext._jsc is not None:
        _current.stop()
    if _cluster is not None:
        import shutil
        _cluster.stop()
        shutil.rmtree(_cluster.workdir, ignore_errors=True)
